// Package htmlreport renders a stored run as a self-contained HTML report
// with inline SVG charts (Write). The comparison of runs is
// analysis.Compare (the numbers) and report.CompareText (the text); the
// one-row-per-trial export is report.WriteCSV and report.WriteJSON.
package htmlreport

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var page = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"num":          num,
	"mean":         func(c analysis.Cell) string { return report.MeanText(c, num) },
	"places":       placesText,
	"ratio":        ratioText,
	"ci":           ciText,
	"pct":          func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
	"time":         timeText,
	"dur":          func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) },
	"plus":         func(a, b float64) float64 { return round1(a + b) },
	"minus":        func(a, b float64) float64 { return round1(a - b) },
	"plotRight":    func(c Chart) float64 { return round1(c.Left + c.PlotW) },
	"plotBottom":   func(c Chart) float64 { return round1(c.Top + c.PlotH) },
	"plotRightOp":  func(c OpChart) float64 { return round1(c.Left + c.PlotW) },
	"plotBottomOp": func(c OpChart) float64 { return round1(c.Top + c.PlotH) },
}).ParseFS(templateFS, "templates/*.tmpl"))

// Input is a stored run and its analysis.
type Input struct {
	Run    store.Run
	Trials []store.Trial
	// Study is the run's stored spec, parsed; nil when it no longer parses
	// (the report then has no study settings or platform options).
	Study  *study.Study
	Result analysis.Result
	// RunNotes are the run's stored notes (degraded modes, skipped
	// platforms).
	RunNotes []store.RunNote
	// Layouts are the stored layouts of topology trials (where each server
	// ran, per-CPU busy time, migrations); nil for none.
	Layouts map[store.TrialKey]placement.Record
	// Traces are the find-max searches of the trials that searched; nil
	// for none.
	Traces []report.Trace
}

// Write writes the HTML report of in: one self-contained page that needs no
// network access.
func Write(w io.Writer, in Input) error {
	var b bytes.Buffer
	if err := page.Execute(&b, build(in)); err != nil {
		return fmt.Errorf("rendering HTML report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	return nil
}

// view is what the template shows.
type view struct {
	Run         store.Run
	Description string
	Baseline    string
	Rounds      int
	Env         []KV
	EnvRaw      string // the environment JSON when it does not decode
	Tools       []KV
	OtherFacts  []KV
	Settings    []KV
	Platforms   []platformRow
	Workloads   []KV
	// Method describes the interval; MinPairs is the verdict rule.
	Method   string
	MinPairs int
	// Client says where the load ran and over what.
	Client string
	// RunNotes are the run's degraded modes and skipped platforms;
	// Disturbed is the CPU account's line.
	RunNotes  []string
	Disturbed string
	// Warnings has one line per kind, AllWarnings every warning.
	Warnings    []string
	AllWarnings []string
	Sections    []section
	// Figures are a seed's composite figures (figure.go), above the
	// per-metric charts.
	Figures     []Figure
	Diagnostics []diagSection
	Placements  []placementView
	Trials      []store.Trial
	Commands    []commandBlock
	Traces      []report.Trace
}

// KV is one labelled value.
type KV struct{ Key, Value string }

type platformRow struct {
	Name, Base, CPUSet, CPUs, Memory string
	// Family is what runs the platform's servers (platform.Family);
	// FamilyFirst marks the first row of a family, where the report
	// names it.
	Family      string
	FamilyFirst bool
}

type section struct {
	Workload string
	// OpCharts are the seeds' per-operation figures; OpMetrics the
	// per-operation metrics' own tables and ratio charts, folded away.
	OpCharts  []OpChart
	Metrics   []metricView
	OpMetrics []metricView
}

type metricView struct {
	Table analysis.Table
	Chart Chart
	// Rows are the table's cells grouped by family, each family named
	// at its first row.
	Rows []cellRow
}

// cellRow is a result cell with the family of its platform.
type cellRow struct {
	analysis.Cell
	Family      string
	FamilyFirst bool
}

// diagSection is one workload's diagnostic metrics: a row per platform, a
// column per metric (its mean).
type diagSection struct {
	Workload string
	Metrics  []KV // name, unit
	Rows     []diagRow
}

type diagRow struct {
	Platform string
	N        int
	Means    []string
}

type commandBlock struct {
	Workload, Platform string
	Round              int
	Where, Commands    []string
}

func build(in Input) view {
	v := view{Run: in.Run, Baseline: in.Result.Baseline, Rounds: in.Result.Rounds, Trials: in.Trials}
	v.Env, v.Tools, v.OtherFacts, v.EnvRaw = envRows(in.Run.Env)
	if st := in.Study; st != nil {
		v.Description = st.Description
		v.Settings = []KV{
			{"baseline", st.Baseline}, {"counted rounds", strconv.Itoa(st.Rounds)},
			{"warm-up rounds", strconv.Itoa(st.Warmup)}, {"trial length", st.Trial.String()},
			{"order", st.Order}, {"seed", strconv.FormatInt(in.Run.Seed, 10)},
		}
		if st.UntilCI > 0 {
			v.Settings = append(v.Settings, KV{"until CI half-width", fmt.Sprintf("%g%% (max %d rounds, %v)", st.UntilCI, st.MaxRounds, st.MaxTime)})
		}
		for _, p := range st.Platforms {
			row := platformRow{Name: p.Name, Base: p.Base, CPUSet: p.Options.CPUSet, Memory: p.Options.Memory, Family: platform.Family(p.Base)}
			if p.Options.CPUs > 0 {
				row.CPUs = strconv.FormatFloat(p.Options.CPUs, 'g', -1, 64)
			}
			v.Platforms = append(v.Platforms, row)
		}
		sort.SliceStable(v.Platforms, func(i, j int) bool {
			return platform.FamilyRank(v.Platforms[i].Base) < platform.FamilyRank(v.Platforms[j].Base)
		})
		for i := range v.Platforms {
			v.Platforms[i].FamilyFirst = i == 0 || v.Platforms[i].Family != v.Platforms[i-1].Family
		}
		for _, w := range st.Workloads {
			v.Workloads = append(v.Workloads, KV{w.Name + " (" + w.Kind + ")", w.Values.Canonical()})
		}
	}
	v.Method = report.MethodText(in.Result)
	v.MinPairs = in.Result.MinPairs
	v.RunNotes = report.RunNoteLines(in.RunNotes)
	v.Client = report.ClientLine(in.RunNotes)
	v.Disturbed = report.DisturbedLine(in.Result)
	v.Warnings = in.Result.Warnings.Summary()
	v.AllWarnings = in.Result.Warnings.Texts()
	bases := map[string]string{}
	if in.Study != nil {
		for _, p := range in.Study.Platforms {
			bases[p.Name] = p.Base
		}
	}
	for i, t := range in.Result.Tables {
		t = byFamily(t, bases)
		if len(v.Sections) == 0 || v.Sections[len(v.Sections)-1].Workload != t.Workload {
			v.Sections = append(v.Sections, section{Workload: t.Workload, OpCharts: opCharts(in.Result, t.Workload, i+1)})
		}
		s := &v.Sections[len(v.Sections)-1]
		mv := metricView{Table: t, Chart: layout(fmt.Sprintf("chart-%d", i+1), t, in.Result.Baseline), Rows: familyRows(t, bases)}
		if _, _, ok := report.SplitOpMetric(t.Metric); ok {
			s.OpMetrics = append(s.OpMetrics, mv)
		} else {
			s.Metrics = append(s.Metrics, mv)
		}
	}
	v.Figures = figures(in.Result)
	v.Diagnostics = diagnostics(in.Result.Diagnostics)
	v.Placements = placements(in.Trials, in.Layouts)
	v.Commands = commands(in.Trials)
	v.Traces = in.Traces
	return v
}

// byFamily orders t's cells by the family of their platform (native,
// Docker's runc, crun, gVisor, Podman, LXC, VM, Kubernetes), keeping the
// study's order within a family; bases maps each platform to its kind
// (empty when the study is unknown: the order stays).
func byFamily(t analysis.Table, bases map[string]string) analysis.Table {
	if len(bases) == 0 {
		return t
	}
	t.Cells = slices.Clone(t.Cells)
	sort.SliceStable(t.Cells, func(i, j int) bool {
		return platform.FamilyRank(bases[t.Cells[i].Platform]) < platform.FamilyRank(bases[t.Cells[j].Platform])
	})
	return t
}

// familyRows are t's cells with their families, each family named at its
// first row when the table holds more than one.
func familyRows(t analysis.Table, bases map[string]string) []cellRow {
	rows := make([]cellRow, len(t.Cells))
	families := map[string]bool{}
	for i, c := range t.Cells {
		rows[i] = cellRow{Cell: c, Family: platform.Family(bases[c.Platform])}
		families[rows[i].Family] = true
	}
	if len(families) > 1 {
		for i := range rows {
			rows[i].FamilyFirst = i == 0 || rows[i].Family != rows[i-1].Family
		}
	}
	return rows
}

// diagnostics lays out the diagnostic tables: per workload a row per
// platform with each metric's mean.
func diagnostics(tabs []analysis.Table) []diagSection {
	var out []diagSection
	for i := 0; i < len(tabs); {
		j := i
		for j < len(tabs) && tabs[j].Workload == tabs[i].Workload {
			j++
		}
		d := diagSection{Workload: tabs[i].Workload}
		var platforms []string
		n := map[string]int{}
		mean := map[[2]string]string{}
		for _, t := range tabs[i:j] {
			d.Metrics = append(d.Metrics, KV{t.Metric, t.Unit})
			for _, c := range t.Cells {
				if _, ok := n[c.Platform]; !ok {
					platforms = append(platforms, c.Platform)
				}
				n[c.Platform] = max(n[c.Platform], c.Summary.N)
				mean[[2]string{t.Metric, c.Platform}] = num(c.Summary.Mean)
			}
		}
		for _, p := range platforms {
			row := diagRow{Platform: p, N: n[p]}
			for _, m := range d.Metrics {
				v, ok := mean[[2]string{m.Key, p}]
				if !ok {
					v = "-"
				}
				row.Means = append(row.Means, v)
			}
			d.Rows = append(d.Rows, row)
		}
		out = append(out, d)
		i = j
	}
	return out
}

// commands returns, per workload and platform, the commands and placement of
// its first counted successful trial (or, failing that, its first trial).
func commands(trials []store.Trial) []commandBlock {
	type wp struct{ w, p string }
	chosen := map[wp]store.Trial{}
	var order []wp
	for _, t := range trials {
		k := wp{t.Workload, t.Platform}
		prev, seen := chosen[k]
		if !seen {
			order = append(order, k)
		}
		good := !t.Warmup && t.Error == ""
		if !seen || (good && (prev.Warmup || prev.Error != "")) {
			chosen[k] = t
		}
	}
	out := make([]commandBlock, 0, len(order))
	for _, k := range order {
		t := chosen[k]
		out = append(out, commandBlock{Workload: t.Workload, Platform: t.Platform, Round: t.Round, Where: t.Where, Commands: t.Commands})
	}
	return out
}

// envRows turns the stored environment into labelled rows, tool versions and
// the remaining facts; raw is the JSON itself when it does not decode.
func envRows(raw json.RawMessage) (rows, tools, other []KV, rawText string) {
	if len(raw) == 0 {
		return nil, nil, nil, ""
	}
	var e sysinfo.Env
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, nil, nil, string(raw)
	}
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, KV{k, v})
		}
	}
	add("host", e.Hostname)
	add("OS", e.OS)
	add("kernel", e.Kernel)
	add("architecture", e.Extra["arch"])
	add("CPU", e.CPUModel)
	if e.CPUs > 0 {
		add("CPUs", fmt.Sprintf("%d usable, %d socket(s), %d NUMA node(s), SMT %s", e.CPUs, e.Sockets, e.NUMANodes, orDash(e.Extra["smt_active"])))
	}
	if e.MemoryBytes > 0 {
		add("memory", fmt.Sprintf("%.1f GiB", float64(e.MemoryBytes)/(1<<30)))
	}
	add("virtualization", e.Virtualization)
	for _, k := range sortedKeys(e.Extra) {
		if strings.Contains(k, "accel") {
			add("VM acceleration", e.Extra[k])
		}
	}
	if kvm := e.Extra["kvm"]; kvm != "" {
		add("/dev/kvm present", kvm)
	}
	add("cgroups", e.CgroupVersion)
	add("CPU governor", e.Governor)
	add("clock source", e.Extra["clocksource"])
	if len(e.Docker) > 0 {
		var parts []string
		for _, k := range sortedKeys(e.Docker) {
			if e.Docker[k] != "" {
				parts = append(parts, k+" "+e.Docker[k])
			}
		}
		add("Docker", strings.Join(parts, ", "))
	}
	add("workload image", e.Extra["image"])
	nv := e.NearnativeVersion
	if e.Commit != "" {
		nv += " (" + e.Commit + ")"
	}
	add("nearnative", nv)
	for _, t := range e.Tools {
		v := t.Version
		if v == "" {
			v = "not found"
		}
		tools = append(tools, KV{t.Name, strings.TrimSpace(v + " " + t.Package)})
	}
	shown := map[string]bool{"arch": true, "smt_active": true, "kvm": true, "clocksource": true, "image": true}
	for _, k := range sortedKeys(e.Extra) {
		if !shown[k] && !strings.Contains(k, "accel") && e.Extra[k] != "" {
			other = append(other, KV{k, e.Extra[k]})
		}
	}
	return rows, tools, other, ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// num formats a value with about four significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a >= 1e4:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.3f", v)
	case a == 0:
		return "0"
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4g", v), "0"), ".")
	}
}

func ratioText(v float64) string {
	if !isFinite(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

func ciText(c analysis.Cell) string {
	if c.IsBaseline || c.NoVerdict != "" || !isFinite(c.Ratio.Lo) || !isFinite(c.Ratio.Hi) {
		return ""
	}
	return fmt.Sprintf("[%.3f, %.3f]", c.Ratio.Lo, c.Ratio.Hi)
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}
