package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBusyLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Load
		busy bool
	}{
		{"idle", Load{CPUs: 2, LoadAvg1: 0.05, Busy: 0.02, Sample: time.Second}, false},
		{"a quarter busy now", Load{CPUs: 2, LoadAvg1: 0.2, Busy: 0.3, Sample: time.Second}, true},
		{"a build that just ended", Load{CPUs: 2, LoadAvg1: 6.5, Busy: 0.04, Sample: time.Second}, true},
		{"load below a quarter of many CPUs", Load{CPUs: 32, LoadAvg1: 7, Busy: 0.2, Sample: time.Second}, false},
		{"the tail of work that ended", Load{CPUs: 2, LoadAvg1: 0.92, Busy: 0, Sample: time.Second}, false},
		{"more runnable tasks than CPUs", Load{CPUs: 2, LoadAvg1: 2.4, Busy: 0.1, Sample: time.Second}, true},
		{"no CPU count", Load{LoadAvg1: 0.1, Busy: 0.1}, false},
	} {
		line := busyLine(tc.l)
		if (line != "") != tc.busy {
			t.Errorf("%s: busyLine(%+v) = %q, want busy %v", tc.name, tc.l, line, tc.busy)
		}
		if tc.busy && !strings.Contains(line, "longer than the estimate") {
			t.Errorf("%s: %q does not say the run will take longer", tc.name, line)
		}
	}
}

func TestParseLoadAvg(t *testing.T) {
	if v, err := parseLoadAvg("12.34 10.00 8.01 3/612 4242\n"); err != nil || v != 12.34 {
		t.Errorf("parseLoadAvg = %v, %v", v, err)
	}
	for _, bad := range []string{"", "x 1 2"} {
		if _, err := parseLoadAvg(bad); err == nil {
			t.Errorf("parseLoadAvg(%q): no error", bad)
		}
	}
}

func TestMeasureLoad(t *testing.T) {
	l, err := MeasureLoad(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.CPUs < 1 || l.Busy < 0 || l.Busy > 1 || l.LoadAvg1 < 0 || l.Sample != loadSample {
		t.Errorf("MeasureLoad = %+v", l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureLoad(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled MeasureLoad: %v", err)
	}
}

// TestRunSaysBusy: a run whose probe finds the machine busy says, after
// its estimate, that it will take longer; a quiet one says nothing more.
func TestRunSaysBusy(t *testing.T) {
	for _, busy := range []bool{false, true} {
		e := newEnv(t)
		st := e.study(t, studyYAML("warmup: 0\nrounds: 2\n", "wa"))
		cfg := e.config(st, "")
		cfg.LoadProbe = func(context.Context) (Load, error) {
			l := Load{CPUs: 2, LoadAvg1: 0.1, Busy: 0.01, Sample: time.Second}
			if busy {
				l.LoadAvg1, l.Busy = 9.5, 0.8
			}
			return l, nil
		}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if got := e.prog.logged("the machine is busy"); got != busy {
			t.Errorf("busy %v: logged the busy line: %v (%q)", busy, got, e.prog.logs)
		}
		if !e.prog.logged("expected duration") {
			t.Errorf("no estimate line: %q", e.prog.logs)
		}
	}
}
