package htmlreport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/analysis"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/report/reporttest"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fixtureInput(t *testing.T) Input {
	t.Helper()
	run, trials := reporttest.Run(reporttest.RunA, 1)
	st := reporttest.Study(t)
	res := analysis.Analyse(trials, analysis.Options{Baseline: "native", Platforms: st.PlatformNames(),
		Stats: stats.Options{Seed: uint64(run.Seed), Resamples: 2000}})
	return Input{Run: run, Trials: trials, Study: st, Result: res}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/htmlreport -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run with -update if the change is intended)\n--- got\n%s", name, got)
	}
}

func TestHTMLGolden(t *testing.T) {
	in := fixtureInput(t)
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html", b.Bytes())
	html := b.String()
	for _, want := range []string{
		"Intel(R) Xeon(R) CPU @ 2.20GHz", "6.1.0-27-amd64", "api_version 1.41", "nearnative/workload:deadbeef",
		"5:7.0.15-1~deb12u1", "VM acceleration", "512m", "lower is better", "the driver may be the bottleneck",
		"redis-benchmark -t set -c 50 -n 100000", "connection refused", `class="ref"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), banned) {
			t.Errorf("HTML contains %q: it must be self-contained", banned)
		}
	}
	cells := 0
	for _, tab := range in.Result.Tables {
		cells += len(tab.Cells)
	}
	if got := strings.Count(html, `<rect class="bar `); got != cells {
		t.Errorf("%d bars, want %d (one per platform and metric)", got, cells)
	}
	if got := strings.Count(html, "<svg "); got != len(in.Result.Tables) {
		t.Errorf("%d charts, want %d", got, len(in.Result.Tables))
	}
}

// TestHTMLTrust: the HTML report states the verdict rule and n, keeps
// diagnostics apart without verdicts, lists the run's degraded modes and
// skipped platforms, and shows one warning line per kind with the full list
// folded away.
func TestHTMLTrust(t *testing.T) {
	in := fixtureInput(t)
	in.RunNotes = []store.RunNote{{Kind: store.NoteDegraded, Subject: "vm", Text: "user-mode network"}, {Kind: store.NoteSkipped, Subject: "vm-docker", Text: "no KVM"}}
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"below 5 there is no verdict", "n&lt;5", // native-q08 has 4 pairs
		`id="diagnostics"`, "client_cpu_pct",
		"degraded: vm: user-mode network", "skipped: vm-docker: no KVM",
		"one line per kind", "all " + strconv.Itoa(len(in.Result.Warnings)) + " warning(s)",
		"Student t on the log ratio of means",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The diagnostic metric has no chart and no verdict.
	diag := html[strings.Index(html, `id="diagnostics"`):]
	diag = diag[:strings.Index(diag, "<h2>Environment")]
	for _, v := range []string{"better", "worse", `class="verdict-`, "<svg"} {
		if strings.Contains(diag, v) {
			t.Errorf("diagnostics section contains %q", v)
		}
	}
	if strings.Contains(html[:strings.Index(html, `id="diagnostics"`)], "client_cpu_pct") {
		t.Error("the diagnostic metric appears among the results")
	}
}

// TestHTMLTraces: a find-max trial's steps are shown in order, each marked
// passed or failed with its outcome on hover, and a search stopped for a
// platform says why.
func TestHTMLTraces(t *testing.T) {
	in := fixtureInput(t)
	in.Traces = []report.Trace{
		{Workload: "auction", Platform: "native", Round: 1, Steps: []store.Step{
			{Phase: "coarse", Value: 50, Pass: true, Summary: "coarse 50 users: pass"},
			{Phase: "coarse", Value: 100, Pass: false, Summary: "coarse 100 users: FAIL within"},
			{Phase: "verify", Value: 50, Pass: true}}},
		{Workload: "auction", Platform: "vm", Round: 1, Error: "the auction did not start on vm: tomcat exited", Steps: []store.Step{
			{Phase: "coarse", Value: 50, Pass: false}}},
	}
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<h2 id="traces">Find-max traces</h2>`,
		`<span class="phase">coarse</span> <span class="step-pass" title="coarse 50 users: pass">50+</span> <span class="step-fail" title="coarse 100 users: FAIL within">100-</span> <span class="phase">verify</span> <span class="step-pass" title="">50+</span>`,
		`<div class="step-fail">stopped: the auction did not start on vm: tomcat exited</div>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	in.Traces = nil
	b.Reset()
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="traces"`) {
		t.Error("a run without searches has a traces section")
	}
}
