package htmlreport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/store"
)

// placementView is one workload on one platform: where its servers ran and
// what the CPUs did, from its last counted trial that recorded a layout,
// with each server's migrations per second averaged over the counted trials.
type placementView struct {
	Workload, Platform string
	Round              int
	Places             []placement.Place
	CPUs               []cpuBar
	Servers            []serverRow
	Note               string
}

type cpuBar struct {
	ID   int
	Busy string // "63%"
	W    int    // bar width in percent
}

type serverRow struct {
	Name, Place, CPUs string
	Migrations        string // per second, mean over counted trials; "-" when unknown
	Trials            int
}

// placements builds the layout views, in the order of the trials.
func placements(trials []store.Trial, layouts map[store.TrialKey]placement.Record) []placementView {
	if len(layouts) == 0 {
		return nil
	}
	type wp struct{ w, p string }
	last := map[wp]store.TrialKey{}
	var order []wp
	sums := map[wp]map[string][]float64{}
	for _, t := range trials {
		if t.Warmup || t.Error != "" {
			continue
		}
		k := store.TrialKey{Run: t.RunID, Round: t.Round, Workload: t.Workload, Platform: t.Platform}
		l, ok := layouts[k]
		if !ok {
			continue
		}
		key := wp{t.Workload, t.Platform}
		if _, seen := last[key]; !seen {
			order = append(order, key)
			sums[key] = map[string][]float64{}
		}
		if prev, seen := last[key]; !seen || prev.Round < k.Round {
			last[key] = k
		}
		for _, s := range l.Servers {
			if s.MigrationsPerSec >= 0 {
				sums[key][s.Name] = append(sums[key][s.Name], s.MigrationsPerSec)
			}
		}
	}
	var out []placementView
	for _, key := range order {
		k := last[key]
		l := layouts[k]
		v := placementView{Workload: key.w, Platform: key.p, Round: k.Round, Places: l.Places, Note: l.Note}
		ids := append([]placement.CPU(nil), l.CPUs...)
		sort.Slice(ids, func(i, j int) bool { return ids[i].ID < ids[j].ID })
		for _, c := range ids {
			v.CPUs = append(v.CPUs, cpuBar{ID: c.ID, Busy: fmt.Sprintf("%.0f%%", c.Busy*100), W: int(c.Busy*100 + 0.5)})
		}
		for _, s := range l.Servers {
			row := serverRow{Name: s.Name, Place: s.Place, CPUs: s.CPUs, Migrations: "-"}
			if s.OnHost {
				row.Place += " (beside the driver)"
			}
			if xs := sums[key][s.Name]; len(xs) > 0 {
				var sum float64
				for _, x := range xs {
					sum += x
				}
				row.Migrations, row.Trials = num(sum/float64(len(xs))), len(xs)
			}
			if row.CPUs == "" {
				row.CPUs = "any"
			}
			v.Servers = append(v.Servers, row)
		}
		out = append(out, v)
	}
	return out
}

// placesText is a place's servers for the table.
func placesText(p placement.Place) string { return strings.Join(p.Servers, ", ") }
