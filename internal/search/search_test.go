package search

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// threshold is a system whose QoS holds up to limit.
func threshold(limit float64) func(float64) bool {
	return func(v float64) bool { return v <= limit }
}

// script passes or fails steps in the order given, then follows then.
func script(outcomes []bool, then func(float64) bool) func(float64) bool {
	i := 0
	return func(v float64) bool {
		if i < len(outcomes) {
			i++
			return outcomes[i-1]
		}
		return then(v)
	}
}

// drive runs a whole search against judge without a callback, through Next
// alone, and returns the steps and the final decision.
func drive(t *testing.T, c Config, judge func(float64) bool) ([]Step, Decision) {
	t.Helper()
	var hist []Step
	for i := 0; i < 200; i++ {
		d, err := Next(c, hist)
		if err != nil {
			t.Fatalf("Next after %d steps: %v", len(hist), err)
		}
		if d.Done {
			return hist, d
		}
		hist = append(hist, Step{Seq: len(hist), Phase: d.Phase, Value: d.Value, Pass: judge(d.Value)})
	}
	t.Fatalf("search did not end in 200 steps: %v", hist)
	return nil, Decision{}
}

type want struct {
	phase Phase
	value float64
}

func TestNextScripted(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		judge func(float64) bool
		steps []want
		found bool
		max   float64
		why   string
	}{{
		// Worked by hand from apps.md's rules: ramp 1000..16000, start 10%
		// below 16000 with a 5% (800) step, grow it 1.5x after 2 fails,
		// shrink the moves that would cross the bracket to half (up) or
		// three quarters (down) of the gap, verify once within 1%.
		name:  "threshold 12000 from 1000",
		cfg:   Config{Start: 1000},
		judge: threshold(12000),
		steps: []want{{Coarse, 1000}, {Coarse, 2000}, {Coarse, 4000}, {Coarse, 8000}, {Coarse, 16000},
			{Fine, 14400}, {Fine, 13600}, {Fine, 12400}, {Fine, 11200}, {Fine, 11800}, {Fine, 12100},
			{Fine, 11875}, {Fine, 11987.5}, {Verify, 11987.5}},
		found: true, max: 11987.5, why: ReasonVerified,
	}, {
		name:  "5% tolerance stops earlier",
		cfg:   Config{Start: 1000, Tolerance: 0.05},
		judge: threshold(12000),
		steps: []want{{Coarse, 1000}, {Coarse, 2000}, {Coarse, 4000}, {Coarse, 8000}, {Coarse, 16000},
			{Fine, 14400}, {Fine, 13600}, {Fine, 12400}, {Fine, 11200}, {Fine, 11800}, {Verify, 11800}},
		found: true, max: 11800, why: ReasonVerified,
	}, {
		// Three passes in a row grow the step 1.25x: 1000 -> 1250.
		name:  "growth after three passes",
		cfg:   Config{Start: 10000, Factor: 2, Step: 0.05, Tolerance: 0.01},
		judge: script([]bool{true, false, true, true, true}, threshold(18000)),
		steps: []want{{Coarse, 10000}, {Coarse, 20000}, {Fine, 18000}, {Fine, 19000},
			// third pass in a row: the step grows to 1250, but 19000+1250
			// would reach 20000, so the move is half the gap
			{Fine, 19500}},
	}, {
		// The first load fails: the coarse ramp runs down to a first pass,
		// and the fine search starts 10% below the failure above it.
		name:  "the first load fails: ramp down",
		cfg:   Config{Start: 100, Min: 10},
		judge: threshold(50),
		steps: []want{{Coarse, 100}, {Coarse, 50}, {Fine, 90}, {Fine, 85},
			// two fails in a row: the step grows from 5 to 7.5
			{Fine, 77.5}, {Fine, 70},
			// two more fails: 7.5 -> 11.25
			{Fine, 58.75},
			// 47.5 would cross the pass at 50: three quarters of the gap down
			{Fine, 52.1875}},
	}, {
		name:  "ramp down several times",
		cfg:   Config{Start: 1000},
		judge: threshold(100),
		steps: []want{{Coarse, 1000}, {Coarse, 500}, {Coarse, 250}, {Coarse, 125}, {Coarse, 62.5}, {Fine, 112.5}},
	}, {
		name:  "nothing passes down to the minimum",
		cfg:   Config{Start: 100, Min: 80, Step: 0.1},
		judge: threshold(10),
		steps: []want{{Coarse, 100}, {Coarse, 80}},
		found: false, why: ReasonMinFailed,
	}, {
		name:  "the maximum passes",
		cfg:   Config{Start: 1000, Max: 5000},
		judge: threshold(1e9),
		steps: []want{{Coarse, 1000}, {Coarse, 2000}, {Coarse, 4000}, {Coarse, 5000}},
		found: true, max: 5000, why: ReasonMaxPassed,
	}, {
		// A verification that fails makes its load the lowest fail; the
		// search goes on below it.
		name:  "verify fails, search goes on",
		cfg:   Config{Start: 1000, Tolerance: 0.05},
		judge: script([]bool{true, true, true, true, false, false, false, false, true, true, false}, threshold(11000)),
		steps: []want{{Coarse, 1000}, {Coarse, 2000}, {Coarse, 4000}, {Coarse, 8000}, {Coarse, 16000},
			{Fine, 14400}, {Fine, 13600}, {Fine, 12400}, {Fine, 11200}, {Fine, 11800}, {Verify, 11800},
			// 11800 failed: bracket 11200..11800, down by the step 1200
			// would cross 11200, so three quarters of the gap: 11350
			{Fine, 11350}},
	}, {
		// A failed verification overrules the only pass: two fails in a
		// row have grown the step from 160 to 360, but the search steps
		// down no faster than the coarse ramp (halving), not to 40.
		name:  "the only pass overruled: no jump below half",
		cfg:   Config{Start: 800, Max: 3200, Integer: true, Tolerance: 0.15, Step: 0.2},
		judge: script([]bool{false, true, false, false, false, false}, threshold(300)),
		steps: []want{{Coarse, 800}, {Coarse, 400}, {Fine, 720}, {Fine, 560}, {Fine, 440}, {Verify, 400}, {Fine, 200}},
	}, {
		name:  "whole users",
		cfg:   Config{Start: 10, Integer: true},
		judge: threshold(27),
		steps: []want{{Coarse, 10}, {Coarse, 20}, {Coarse, 40}, {Fine, 36}, {Fine, 34},
			{Fine, 31}, {Fine, 28}, {Fine, 24}, {Fine, 26}, {Fine, 27}, {Verify, 27}},
		found: true, max: 27, why: ReasonVerified,
	}, {
		name:  "step cap",
		cfg:   Config{Start: 1000, MaxSteps: 4},
		judge: threshold(1e9),
		steps: []want{{Coarse, 1000}, {Coarse, 2000}, {Coarse, 4000}, {Coarse, 8000}},
		found: true, max: 8000, why: ReasonStepCap,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hist, d := drive(t, tc.cfg, tc.judge)
			for i, w := range tc.steps {
				if i >= len(hist) {
					t.Fatalf("only %d steps, want at least %d: %v", len(hist), len(tc.steps), hist)
				}
				if hist[i].Phase != w.phase || math.Abs(hist[i].Value-w.value) > 1e-9 {
					t.Fatalf("step %d = %s %g, want %s %g\nhistory: %v", i, hist[i].Phase, hist[i].Value, w.phase, w.value, hist)
				}
			}
			if tc.why == "" {
				return
			}
			if len(hist) != len(tc.steps) {
				t.Errorf("%d steps, want %d: %v", len(hist), len(tc.steps), hist)
			}
			if d.Found != tc.found || d.Max != tc.max || d.Reason != tc.why {
				t.Errorf("decision = found %v max %g (%s), want found %v max %g (%s)", d.Found, d.Max, d.Reason, tc.found, tc.max, tc.why)
			}
		})
	}
}

// TestNextConverges checks the search's promise on many thresholds: the
// result passes, and is within the tolerance of the true limit.
func TestNextConverges(t *testing.T) {
	for _, tol := range []float64{0.01, 0.05} {
		for limit := 3.7; limit < 200000; limit *= 1.37 { // below and above the start
			c := Config{Start: 100, Tolerance: tol}
			hist, d := drive(t, c, threshold(limit))
			if !d.Found || d.Reason != ReasonVerified {
				t.Fatalf("limit %g: %+v after %v", limit, d, hist)
			}
			if d.Max > limit || d.Max < limit*(1-tol) {
				t.Errorf("limit %g tol %g: found %g, want within (%g, %g]", limit, tol, d.Max, limit*(1-tol), limit)
			}
			if len(hist) > 30 {
				t.Errorf("limit %g: %d steps", limit, len(hist))
			}
			for i, h := range hist {
				if i > 0 && h.Phase == Fine && hist[i-1].Phase == Fine && h.Value == hist[i-1].Value {
					t.Errorf("limit %g: step %d repeats %g", limit, i, h.Value)
				}
			}
		}
	}
}

// TestNextNeverCrosses checks that no fine step leaves the bracket of the
// best pass and the worst fail known before it.
func TestNextNeverCrosses(t *testing.T) {
	hist, _ := drive(t, Config{Start: 50}, threshold(7777))
	for i, h := range hist {
		if h.Phase != Fine {
			continue
		}
		s, err := replay(Config{Start: 50}.withDefaults(), hist[:i])
		if err != nil {
			t.Fatal(err)
		}
		if s.hasPass && h.Value <= s.maxPass || s.hasFail && h.Value >= s.minFail {
			t.Errorf("step %d at %g outside the bracket (%g, %g)", i, h.Value, s.maxPass, s.minFail)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "start 0: must be positive"},
		{Config{Start: -1}, "must be positive"},
		{Config{Start: math.NaN()}, "must be positive"},
		{Config{Start: 10, Max: 5}, "maximum 5 is below its start 10"},
		{Config{Start: 10, Min: 20}, "start 10 is below its minimum 20"},
		{Config{Start: 10, Factor: 1}, "factor 1: must be above 1"},
		{Config{Start: 10, Tolerance: 1.5}, "tolerance 1.5"},
		{Config{Start: 10, Step: -0.1}, "step -0.1"},
		{Config{Start: 10, Below: 1}, "first failure 1"},
		{Config{Start: 10, MaxSteps: 1}, "step cap 1"},
		{Config{Start: 10}, ""},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to say %q", tc.cfg, err, tc.want)
		}
	}
}

func TestNextBadHistory(t *testing.T) {
	c := Config{Start: 10}
	tests := [][]Step{
		{{Seq: 1, Phase: Coarse, Value: 10}},
		{{Seq: 0, Phase: Fine, Value: 10}},
		{{Seq: 0, Phase: Coarse, Value: 10}, {Seq: 1, Phase: "sideways", Value: 10}},
		{{Seq: 0, Phase: Coarse, Value: 10, Pass: true}, {Seq: 1, Phase: Coarse, Value: 20}, {Seq: 2, Phase: Coarse, Value: 40, Pass: true}},
		{{Seq: 0, Phase: Coarse, Value: -3}},
	}
	for i, h := range tests {
		if _, err := Next(c, h); !errors.Is(err, ErrHistory) {
			t.Errorf("history %d: error %v, want ErrHistory", i, err)
		}
	}
}

func TestRunResumes(t *testing.T) {
	c := Config{Start: 1000, Tolerance: 0.02}
	judge := threshold(23456)
	want, wantDecision := drive(t, c, judge)

	// The context is cancelled while the seventh step runs, as a Ctrl-C
	// would; that step is not stored and the resumed search runs it again.
	log := &MemLog{}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	exec := func(ctx context.Context, s Step) (Outcome, error) {
		calls++
		if calls == 7 {
			cancel() // interrupted during the seventh step
		}
		return Outcome{Pass: judge(s.Value), Summary: "x"}, nil
	}
	if _, err := Run(ctx, c, log, exec); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Run: error %v, want context.Canceled", err)
	}
	stored, _ := log.Steps(context.Background())
	if len(stored) != 6 {
		t.Fatalf("%d steps stored after an interrupt in the seventh, want 6", len(stored))
	}
	calls = 0
	res, err := Run(context.Background(), c, log, exec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 6 || calls != len(want)-6 {
		t.Errorf("resumed %d steps and ran %d, want 6 and %d", res.Resumed, calls, len(want)-6)
	}
	if len(res.Steps) != len(want) {
		t.Fatalf("resumed search took %d steps, an uninterrupted one %d", len(res.Steps), len(want))
	}
	for i := range want {
		if res.Steps[i].Value != want[i].Value || res.Steps[i].Phase != want[i].Phase || res.Steps[i].Seq != i {
			t.Errorf("step %d = %s %g, uninterrupted %s %g", i, res.Steps[i].Phase, res.Steps[i].Value, want[i].Phase, want[i].Value)
		}
	}
	if res.Max != wantDecision.Max || !res.Found {
		t.Errorf("resumed result %g, uninterrupted %g", res.Max, wantDecision.Max)
	}
}

func TestRunExecError(t *testing.T) {
	boom := errors.New("server died")
	_, err := Run(context.Background(), Config{Start: 5}, nil, func(context.Context, Step) (Outcome, error) {
		return Outcome{}, boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "coarse step 0 at 5") {
		t.Errorf("error %v, want the step and the cause", err)
	}
}

// TestSimulate checks the steps of a noise-free search against hand counts
// and against driving Next with the same threshold.
func TestSimulate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		top  float64
		want int
	}{
		{"the maximum allowed passes", Config{Start: 25, Max: 400, Integer: true}, 1000, 5},    // 25 50 100 200 400
		{"everything fails", Config{Start: 25, Min: 1, Integer: true}, 0, 6},                   // 25 13 7 4 2 1 (halved, rounded)
		{"step cap", Config{Start: 25, Max: 400, MaxSteps: 3, Integer: true}, 1000, 3},         // 25 50 100
		{"first load fails, then passes", Config{Start: 100, Max: 400, Integer: true}, 60, -1}, // counted by drive
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Simulate(tc.c, tc.top)
			if err != nil {
				t.Fatal(err)
			}
			hist, _ := drive(t, tc.c, threshold(tc.top))
			if !reflect.DeepEqual(got, hist) || tc.want >= 0 && len(got) != tc.want {
				t.Errorf("Simulate: %d steps %v, want %d (driving Next: %v)", len(got), got, tc.want, hist)
			}
		})
	}
	for top := 3.7; top < 200000; top *= 1.37 {
		c := Config{Start: 100, Tolerance: 0.05}
		hist, _ := drive(t, c, threshold(top))
		if got, _ := Simulate(c, top); !reflect.DeepEqual(got, hist) {
			t.Errorf("top %g: Simulate %v, driving Next %v", top, got, hist)
		}
	}
	if _, err := Simulate(Config{Start: -1}, 10); err == nil {
		t.Error("a bad config gave no error")
	}
}

// TestCeiling checks which endings are a lower bound rather than a
// maximum, and what the decision names as the limit.
func TestCeiling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		judge   func(float64) bool
		ceiling bool
		is      string
		max     float64
	}{
		{"the data's limit passed", Config{Start: 400, Max: 3000, Integer: true, MaxIs: "the data's limit"}, threshold(1e9), true, "the data's limit", 3000},
		{"an unnamed maximum passed", Config{Start: 400, Max: 3000, Integer: true}, threshold(1e9), true, "the search's maximum", 3000},
		{"step cap in the coarse ramp", Config{Start: 1000, MaxSteps: 4}, threshold(1e9), true, "the step cap", 8000},
		{"a failure below the maximum", Config{Start: 400, Max: 3000, Integer: true, Tolerance: 0.2, MaxIs: "the data's limit"}, threshold(2000), false, "", 0},
		{"step cap after a failure", Config{Start: 1000, MaxSteps: 7}, threshold(12000), false, "", 0},
		{"nothing passed", Config{Start: 100, Min: 80, Step: 0.1}, threshold(10), false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist, d := drive(t, tc.cfg, tc.judge)
			c, ok := d.CeilingOf("peak")
			if ok != tc.ceiling || d.Ceiling != tc.ceiling {
				t.Fatalf("ceiling %v (%+v), want %v; steps %v", ok, d, tc.ceiling, hist)
			}
			if !ok {
				return
			}
			if c.Is != tc.is || c.Value != tc.max || c.Metric != "peak" {
				t.Errorf("ceiling %+v, want %g (%s)", c, tc.max, tc.is)
			}
			back, ok := ParseCeiling(c.Note())
			if !ok || back != c {
				t.Errorf("ParseCeiling(%q) = %+v %v, want %+v", c.Note(), back, ok, c)
			}
		})
	}
	for _, note := range []string{"", "find-max: 3000 users passed", "ceiling: peak >= x (limit)", "ceiling: peak 3000", "ceiling: peak <= 3000 (limit)"} {
		if c, ok := ParseCeiling(note); ok {
			t.Errorf("ParseCeiling(%q) = %+v, want no ceiling", note, c)
		}
	}
}

// TestFloor checks that a search whose every load failed down to its
// minimum ends at an upper bound named by MinIs, and that no other ending
// does.
func TestFloor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		judge func(float64) bool
		floor bool
		is    string
		at    float64
	}{
		{"nothing passed down to a named minimum", Config{Start: 1000, Min: 166, MinIs: "the lowest rate tried"}, threshold(10), true, "the lowest rate tried", 166},
		{"nothing passed, unnamed", Config{Start: 100, Min: 80, Step: 0.1}, threshold(10), true, "the search's minimum", 80},
		{"a pass below the start", Config{Start: 1000, Min: 100}, threshold(300), false, "", 0},
		// http-max-lb's docker-nat on 2026-11-27: 250 passed once, then
		// every step failed, its verification included, and the cap came
		// before the minimum.
		{"the step cap after the only pass was overruled", Config{Start: 2000, Min: 100, Tolerance: 0.05, MaxSteps: 12},
			script([]bool{false, false, false, true}, threshold(0)), true, "the lowest load tried before the step cap", 0},
		{"a ceiling is no floor", Config{Start: 400, Max: 3000, Integer: true}, threshold(1e9), false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist, d := drive(t, tc.cfg, tc.judge)
			c, ok := d.FloorOf("max_rate")
			if ok != tc.floor {
				t.Fatalf("floor %v (%+v), want %v; steps %v", ok, d, tc.floor, hist)
			}
			if _, ceil := d.CeilingOf("max_rate"); ceil && ok {
				t.Fatalf("both a floor and a ceiling: %+v", d)
			}
			if !ok {
				return
			}
			low := math.Inf(1)
			for _, st := range hist {
				if !st.Pass {
					low = math.Min(low, st.Value)
				}
			}
			if tc.at == 0 {
				tc.at = low // where the script's search went
			}
			if c.Is != tc.is || c.Value != tc.at || c.Value != low || !c.Below || c.Op() != "<" {
				t.Errorf("floor %+v, want < %g (%s)", c, tc.at, tc.is)
			}
			back, ok := ParseCeiling(c.Note())
			if !ok || back != c {
				t.Errorf("ParseCeiling(%q) = %+v %v, want %+v", c.Note(), back, ok, c)
			}
		})
	}
}
