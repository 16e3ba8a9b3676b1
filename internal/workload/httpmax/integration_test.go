package httpmax

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// quickParams make a search short enough for a test, with a limit that a
// shared machine loaded by other engineers' builds (p99 of 100 ms at a few
// hundred requests/s seen) can meet: what the test checks is the
// mechanism, not this machine's figure. The 0.5 s coarse steps let the
// ramp halve down to 200 requests/s (100 requests a decision) before it
// gives up, should a loaded machine fail the first steps.
var quickParams = map[string]string{"limit": "300ms", "tolerance": "0.2", "start_rate": "500", "step_warmup": "200ms",
	"coarse_interval": "500ms"}

// TestFindMaxOnPlatforms runs a short find-max trial with real nginx on
// native, docker-bridge and docker-host.
func TestFindMaxOnPlatforms(t *testing.T) {
	findMax(t, quickParams, []string{platform.Native, platform.DockerBridge, platform.DockerHost},
		func(t *testing.T, res workload.Result) {
			if !strings.Contains(strings.Join(res.Commands, "\n"), "nginx") {
				t.Errorf("commands %q", res.Commands)
			}
		})
}

// findMax runs a short find-max trial of an instance with params on each
// platform of kinds and checks what every trial must hold: its metrics,
// a maximum that a step passed at, a search that ended verified or at its
// cap, a complete record of every step, the servers' CPU measured; check
// adds the variant's own.
func findMax(t *testing.T, params map[string]string, kinds []string, check func(t *testing.T, res workload.Result)) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs nginx (and HAProxy) natively and in containers")
	}
	run := runid.New()
	ps := testenv.Platforms(t, run, t.TempDir(), kinds...)
	in, err := newInstance(t, params, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		t.Run(k, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			log, series := &search.MemLog{}, &testenv.Series{}
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t1", Platform: ps[k], Duration: 500 * time.Millisecond,
				RawDir: t.TempDir(), Log: testenv.Log{T: t}, Steps: log, Series: series})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, m := range in.Metrics() {
				if _, ok := res.Values[m.Name]; !ok {
					t.Errorf("metric %s missing", m.Name)
				}
			}
			steps, _ := log.Steps(ctx)
			if len(steps) < 2 {
				t.Fatalf("%d steps logged", len(steps))
			}
			max := res.Values[MetricMaxRate]
			if max < 1 || max > 1e6 {
				t.Errorf("max rate %g", max)
			}
			if res.Values[MetricServerCPU] <= 0 {
				t.Errorf("the servers' CPU at the maximum %g%%", res.Values[MetricServerCPU])
			}
			// The maximum is a rate that passed, and no passing step after
			// the last failure at or below it (the search's latest evidence
			// wins), so it is the value of a passing step.
			passedAtMax := false
			for _, st := range steps {
				if st.Pass && st.Value == max {
					passedAtMax = true
				}
			}
			if !passedAtMax {
				t.Errorf("max rate %g is no passing step's rate", max)
			}
			// The search ends verified, or at the quick step cap with its
			// best pass unverified, which the notes then say; a cap met
			// before any step failed (a quiet machine passes every coarse
			// step up to it) is a ceiling, a lower bound the notes name.
			last := steps[len(steps)-1]
			verified := last.Phase == search.Verify && last.Pass && last.Value == max
			ceiling := false
			for _, n := range res.Notes {
				if c, ok := search.ParseCeiling(n); ok && c.Metric == MetricMaxRate && c.Value == max {
					ceiling = true
				}
			}
			capped := len(steps) == in.search.MaxSteps && (ceiling || strings.Contains(strings.Join(res.Notes, "\n"), "not verified"))
			if !verified && !capped {
				t.Errorf("the search ended neither verified nor at its cap of %d steps", in.search.MaxSteps)
			}
			if int(res.Values[MetricSteps]) != len(steps) || series.Steps() != len(steps) {
				t.Errorf("%g steps reported, %d logged, %d series", res.Values[MetricSteps], len(steps), series.Steps())
			}
			// Every step's record is complete, whatever the step met: on a
			// loaded machine a step may have no request answered (or none
			// sent), and its record must still say so rule by rule. (The
			// steps' summaries are in the log above.)
			for _, st := range steps {
				var d stepDetail
				err := json.Unmarshal(st.Detail, &d)
				if err != nil || d.Due == 0 || d.Sent > d.Due || len(d.QoS.Outcomes) != 3 || d.QoS.Pass != st.Pass ||
					st.Pass && (d.CPUPerReqUs <= 0 || d.Throughput <= 0) {
					t.Errorf("step %d's record %+v (%v)", st.Seq, d, err)
				}
			}
			if !strings.Contains(strings.Join(res.Notes, "\n"), OpenLoopNote) {
				t.Errorf("notes %q", res.Notes)
			}
			check(t, res)
		})
	}
}

// TestFloorIsAFinding: a limit no request can meet fails every rate, down to
// the lowest the search tries or until its step cap; either way the trial
// is still a result, max_rate the lowest rate that failed marked as an
// upper bound (the analysis shows "< 100") with no other metric, since no
// step met the QoS to measure one at.
func TestFloorIsAFinding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx")
	}
	run := runid.New()
	ps := testenv.Platforms(t, run, t.TempDir(), platform.Native)
	for _, tc := range []struct {
		name, start, steps, is string
		at                     float64
	}{
		{"down to the lowest rate", "100", "40", "the lowest rate tried", 100},
		{"the step cap first", "2000", "2", "the lowest load tried before the step cap", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := newInstance(t, map[string]string{"limit": "1us", "start_rate": tc.start, "max_steps": tc.steps,
				"step_warmup": "200ms", "coarse_interval": "500ms"}, true)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			log := &search.MemLog{}
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t1", Platform: ps[platform.Native], Duration: 500 * time.Millisecond,
				RawDir: t.TempDir(), Log: testenv.Log{T: t}, Steps: log, Series: &testenv.Series{}})
			if err != nil {
				t.Fatalf("Run: %v (a search with no standing pass is a finding, not a failed trial)", err)
			}
			var floor search.Ceiling
			for _, n := range res.Notes {
				if c, ok := search.ParseCeiling(n); ok {
					floor = c
				}
			}
			if !floor.Below || floor.Metric != MetricMaxRate || floor.Value != tc.at || floor.Is != tc.is {
				t.Errorf("bound note %+v, want max_rate < %g (%s); notes %q", floor, tc.at, tc.is, res.Notes)
			}
			if res.Values[MetricMaxRate] != tc.at || len(res.Values) != 2 || res.Values[MetricSteps] < 1 {
				t.Errorf("values %v, want max_rate %g and the steps only", res.Values, tc.at)
			}
			// The engine stores a trial only with every declared metric
			// valued or named unmeasured.
			if n := len(res.Values) + len(res.Unmeasured); n != len(in.Metrics()) {
				t.Errorf("%d metrics valued, %v unmeasured, %d declared", len(res.Values), res.Unmeasured, len(in.Metrics()))
			}
			steps, _ := log.Steps(ctx)
			for _, st := range steps {
				if st.Pass {
					t.Errorf("step %d passed a 1 µs p99 limit: %s", st.Seq, st.Summary)
				}
			}
		})
	}
}

// TestServerDiesMidTrial kills nginx during the search: the trial fails,
// saying so, with the tail of the server's log.
func TestServerDiesMidTrial(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx")
	}
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	in, err := newInstance(t, quickParams, true)
	if err != nil {
		t.Fatal(err)
	}
	series := &testenv.Series{AtStep: func(step int) {
		if step == 1 {
			testenv.KillProcs(t, run, "nginx")
		}
	}}
	raw := filepath.Join(root, "raw")
	_, err = in.Run(context.Background(), workload.Trial{Run: run, Name: "t1", Platform: ps[platform.Native], Duration: 500 * time.Millisecond,
		RawDir: raw, Log: testenv.Log{T: t}, Series: series})
	if err == nil || !strings.Contains(err.Error(), "the nginx server stopped answering") || !strings.Contains(err.Error(), "last lines of its log") {
		t.Fatalf("error %v, want the server's death and its log", err)
	}
	t.Logf("the trial failed with: %v", err)
}

// TestFindMaxBehindHAProxy runs a short find-max trial through HAProxy in
// front of two nginx servers, deployed as a topology on native, docker-nat
// (only HAProxy's ports published) and docker-host, and checks from
// HAProxy's own statistics that both nginx served requests.
func TestFindMaxBehindHAProxy(t *testing.T) {
	params := map[string]string{"lb": "haproxy", "max_steps": "6"}
	for k, v := range quickParams {
		params[k] = v
	}
	findMax(t, params, []string{platform.Native, platform.DockerNAT, platform.DockerHost}, func(t *testing.T, res workload.Result) {
		notes := strings.Join(res.Notes, "\n")
		// The note lists each backend's 2xx responses; the trial fails
		// when one got none, so both must be there and non-zero.
		var line string
		for _, n := range res.Notes {
			if strings.HasPrefix(n, "HAProxy's 2xx responses per nginx backend") {
				line = n
			}
		}
		t.Log(line)
		for _, b := range []string{"web0 ", "web1 "} {
			i := strings.Index(line, b)
			if i < 0 {
				t.Errorf("no responses of %s in %q", b, line)
				continue
			}
			n, _ := strconv.Atoi(strings.TrimRight(strings.Fields(line[i+len(b):])[0], ","))
			if n < 100 {
				t.Errorf("%s served %d requests: %q", b, n, line)
			}
		}
		cmds := strings.Join(res.Commands, "\n")
		if !strings.Contains(cmds, "haproxy -db -f") || strings.Count(cmds, "exec nginx") != 2 || !strings.Contains(notes, "lb haproxy") {
			t.Errorf("commands %q, notes %q", res.Commands, res.Notes)
		}
		if len(res.Where) < 3 {
			t.Errorf("where %q", res.Where)
		}
	})
}
