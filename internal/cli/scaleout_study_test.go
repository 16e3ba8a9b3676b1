package cli

import (
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/report"
	"github.com/nearnative/nearnative/internal/study"
)

// TestScaleoutStudy checks the built-in redis-scaleout study against the
// real registry: the seed's platforms (native unpinned and pinned, the
// Docker paths, the VM rows), and a --quick that keeps native and Docker
// with at least 5 counted rounds.
func TestScaleoutStudy(t *testing.T) {
	reg := Registry()
	s, err := study.Load("redis-scaleout", reg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Platforms {
		names = append(names, p.Name)
		if p.Name == "native-pinned" && (p.Base != platform.Native || p.Options.Pin != platform.PinSpread) {
			t.Errorf("native-pinned: base %s, options %+v", p.Base, p.Options)
		}
	}
	if got := strings.Join(names, ","); got != "native,native-pinned,docker-nat,docker-bridge,docker-host,vm,vm-docker" {
		t.Errorf("platforms %s", got)
	}
	if len(s.Workloads) != 1 || s.Workloads[0].Kind != "redis-scaleout" || s.Baseline != "native" {
		t.Errorf("workloads %+v, baseline %s", s.Workloads, s.Baseline)
	}
	if err := s.Apply(study.Overrides{Quick: true}, reg); err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, p := range s.Platforms {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "native,native-pinned,docker-nat,docker-bridge,docker-host" || s.Rounds < 5 {
		t.Errorf("--quick: platforms %s, %d rounds", got, s.Rounds)
	}
	if got := strings.Join(s.QuickLeftOut, ","); got != "vm,vm-docker" {
		t.Errorf("--quick left out %q", got)
	}
	if k := s.Workloads[0].Values.Int("keyspace"); k != 200000 {
		t.Errorf("--quick keyspace %d", k)
	}
}

// TestScaleoutMetricNames: every metric the report's speedup summary and
// figure read is one the redis-scaleout workload reports, under the same
// name (the two packages spell them apart).
func TestScaleoutMetricNames(t *testing.T) {
	reg := Registry()
	s, err := study.Load("redis-scaleout", reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(study.Overrides{Quick: true}, reg); err != nil {
		t.Fatal(err)
	}
	kind, _ := reg.Get("redis-scaleout")
	in, err := kind.New(s.Workloads[0].Values)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range in.Metrics() {
		have[m.Name] = true
	}
	for _, m := range report.ScaleoutMetrics {
		if !have[m] {
			t.Errorf("the report reads %s, which redis-scaleout does not report", m)
		}
	}
}
