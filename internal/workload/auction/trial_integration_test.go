package auction

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// trialParams make a whole find-max trial short enough for a test: the
// data for 30 users, one application server, 10 then 20 then 30 users
// (the search's maximum), 2 s ramps and 3 s warm-ups and decisions. What
// the test checks is the mechanism, not this machine's peak.
var trialParams = map[string]string{"max_users": "30", "start_users": "10", "app_servers": "1", "max_steps": "3",
	"ramp_up": "2s", "step_warmup": "3s", "coarse_interval": "3s", "item_idle": "3s", "tolerance": "0.3"}

// TestTrialOnPlatforms runs one short whole trial of the workload (the
// application and the data ready, the stack deployed, a find-max search of
// simulated users, the metrics at the peak) natively and with a container
// per server on Docker's NAT network.
func TestTrialOnPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the auction's servers natively and in containers")
	}
	run := runid.New()
	kinds := []string{platform.Native, platform.DockerNAT}
	ps := testenv.Platforms(t, run, t.TempDir(), kinds...)
	in, err := newInstance(t, trialParams, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		t.Run(k, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			log, series := &search.MemLog{}, &testenv.Series{}
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "t-" + k, Platform: ps[k], Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 3 * time.Second, RawDir: t.TempDir(), Log: testenv.Log{T: t}, Steps: log, Series: series})
			steps, _ := log.Steps(ctx)
			for _, st := range steps {
				t.Logf("step %d %s %g pass %v: %s", st.Seq, st.Phase, st.Value, st.Pass, st.Summary)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, m := range in.Metrics() {
				if _, ok := res.Values[m.Name]; !ok {
					t.Errorf("metric %s missing", m.Name)
				}
			}
			peak := res.Values[MetricPeakUsers]
			if peak < 10 || peak > 30 || len(steps) < 1 || len(steps) > in.maxSteps {
				t.Fatalf("peak %g users after %d steps: want 10 to 30 users within %d steps", peak, len(steps), in.maxSteps)
			}
			if int(res.Values[MetricSteps]) != len(steps) || series.Steps() != len(steps) {
				t.Errorf("%g steps reported, %d logged, %d series", res.Values[MetricSteps], len(steps), series.Steps())
			}
			var at stepDetail
			for _, st := range steps {
				if st.Pass && st.Value == peak {
					if err := json.Unmarshal(st.Detail, &at); err != nil {
						t.Fatal(err)
					}
				}
			}
			if at.Users != int(peak) || at.Throughput <= 0 || at.Ops[OpLogin].Count == 0 || len(at.QoS.Outcomes) == 0 {
				t.Errorf("the peak's record: users %d, %.1f ops/s, %d logins, %d QoS outcomes", at.Users, at.Throughput, at.Ops[OpLogin].Count, len(at.QoS.Outcomes))
			}
			// Every tier worked at the peak: the users logged in (app, db),
			// nginx forwarded, and the bids went through the broker.
			for _, r := range Roles {
				if res.Values[TierMetric(r)] <= 0 {
					t.Errorf("tier %s used no CPU at the peak (%v)", r, at.Tiers)
				}
			}
			notes := strings.Join(res.Notes, "\n")
			for _, want := range []string{"find-max over users", "data for 30 users", "shorter than Weathervane's findMax"} {
				if !strings.Contains(notes, want) {
					t.Errorf("notes lack %q:\n%s", want, notes)
				}
			}
			if cmds := strings.Join(res.Commands, "\n"); !strings.Contains(cmds, "nginx") || !strings.Contains(cmds, "rabbitmq") || !strings.Contains(cmds, "driver: closed loop") {
				t.Errorf("commands:\n%s", cmds)
			}
		})
	}
}

// TestTrialStopsUnit breaks the stack: a JVM heap the application server
// refuses, and RabbitMQ killed after the first step. Either way the trial
// fails with a StackError marked as ending its platform's cell (the study
// goes on with the others, rather than searching on with a stack that no
// longer auctions), naming what failed.
func TestTrialStopsUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the auction's servers natively")
	}
	tests := []struct {
		name   string
		params map[string]string // over trialParams
		kill   string            // the process killed after the first step
		want   []string          // words of the error
	}{
		{"the app server fails to start", map[string]string{"app_heap": "1k"}, "", []string{"app", "heap"}},
		{"the broker dies mid-trial", nil, "beam.smp", []string{"broker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := runid.New()
			ps := testenv.Platforms(t, run, t.TempDir(), platform.Native)
			params := maps.Clone(trialParams)
			maps.Copy(params, tt.params)
			in, err := newInstance(t, params, true)
			if err != nil {
				t.Fatal(err)
			}
			series := &testenv.Series{AtStep: func(step int) {
				if step == 0 && tt.kill != "" {
					testenv.KillProcs(t, run, tt.kill)
				}
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			_, err = in.Run(ctx, workload.Trial{Run: run, Name: "t-stop", Platform: ps[platform.Native], Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 3 * time.Second, RawDir: t.TempDir(), Log: testenv.Log{T: t}, Steps: &search.MemLog{}, Series: series})
			var se *StackError
			if !errors.Is(err, workload.ErrUnitStopped) || !errors.As(err, &se) {
				t.Fatalf("error %v: want a StackError that stops the unit", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want %q in it", err, w)
				}
			}
			t.Logf("the trial failed with: %v", err)
		})
	}
}
