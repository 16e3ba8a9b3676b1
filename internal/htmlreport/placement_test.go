package htmlreport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/store"
)

func TestPlacementSection(t *testing.T) {
	in := fixtureInput(t)
	in.Layouts = map[store.TrialKey]placement.Record{}
	var counted int
	for _, tr := range in.Trials {
		if tr.Warmup || tr.Error != "" || tr.Platform != "docker-nat" {
			continue
		}
		counted++
		in.Layouts[store.TrialKey{Run: tr.RunID, Round: tr.Round, Workload: tr.Workload, Platform: tr.Platform}] = placement.Record{
			Places: []placement.Place{{Name: "nn-x-i0-redis-0", Kind: "container", Address: "172.17.0.2", CPUs: "1", Servers: []string{"i0-redis-0"}}},
			Servers: []placement.Server{
				{Name: "i0-redis-0", Role: "redis", Place: "nn-x-i0-redis-0", CPUs: "1", MigrationsPerSec: float64(10 * tr.Round)},
				{Name: "i0-lb-0", Role: "lb", Place: "host", OnHost: true, MigrationsPerSec: -1},
			},
			CPUs: []placement.CPU{{ID: 1, Busy: 0.9}, {ID: 0, Busy: 0.25}},
			Note: "one NUMA node",
		}
	}
	if counted == 0 {
		t.Fatal("the fixture has no counted docker-nat trial")
	}
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	sec := html[strings.Index(html, `<h2 id="layout">`):strings.Index(html, "<h2>Environment</h2>")]
	for _, want := range []string{
		"redis-set on docker-nat", "nn-x-i0-redis-0", "172.17.0.2",
		"CPU 0</span>", "25%", "CPU 1</span>", "90%",
		"i0-lb-0</td><td>host (beside the driver)</td><td>any</td><td class=\"n\">-</td>",
		"one NUMA node",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("layout section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Index(sec, "CPU 0</span>") > strings.Index(sec, "CPU 1</span>") {
		t.Errorf("CPUs not in number order")
	}
}
