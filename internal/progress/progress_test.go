package progress

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/study"
)

// TestRoundLabels checks that rounds are numbered from 1 out of all the
// run's rounds, whether or not the first is a warm-up round, on both
// displays.
func TestRoundLabels(t *testing.T) {
	u := study.Unit{Workload: study.Workload{Name: "w"}, Platform: study.Platform{Name: "p"}}
	for _, tt := range []struct {
		round  int
		warmup bool
		want   string
	}{
		{0, true, "warm-up round 1/3: w on p"},
		{0, false, "round 1/3: w on p"},
		{2, false, "round 3/3: w on p"},
	} {
		// Both displays: the plain lines and the terminal's bar.
		for _, mk := range []func(w io.Writer) Display{New, func(w io.Writer) Display { return &Bar{w: w} }} {
			var b bytes.Buffer
			l := mk(&b)
			l.Begin(runid.New(), 3, 0, 3)
			l.TrialStart(tt.round, tt.warmup, u)
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("%T: round %d warmup %v: %q, want %q", l, tt.round, tt.warmup, b.String(), tt.want)
			}
		}
	}
}
