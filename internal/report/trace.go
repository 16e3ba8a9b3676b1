package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/store"
)

// Trace is one trial's find-max search as stored: the load of each step,
// its phase and whether the step met the workload's QoS.
type Trace struct {
	Workload, Platform string
	Round              int
	Warmup             bool
	// Error is the trial's error: a search stopped for that platform says
	// why here.
	Error string
	Steps []store.Step
}

// TracePhase is one phase of a trace: its name and its steps in order.
type TracePhase struct {
	Phase string
	Steps []TraceStep
}

// TraceStep is one step of a trace.
type TraceStep struct {
	Value string
	Pass  bool
	// Summary is the step's stored one-line outcome.
	Summary string
}

// Phases groups a trace's consecutive steps by phase (coarse, fine,
// verify), in order.
func (t Trace) Phases() []TracePhase {
	var out []TracePhase
	for _, s := range t.Steps {
		if len(out) == 0 || out[len(out)-1].Phase != s.Phase {
			out = append(out, TracePhase{Phase: s.Phase})
		}
		p := &out[len(out)-1]
		p.Steps = append(p.Steps, TraceStep{Value: strconv.FormatFloat(s.Value, 'g', -1, 64), Pass: s.Pass, Summary: s.Summary})
	}
	return out
}

// Line is the trace on one line: "coarse 50+ 100+ 200-; fine 160+ 180-;
// verify 160+" (+ met the QoS, - did not).
func (t Trace) Line() string {
	var parts []string
	for _, p := range t.Phases() {
		var b strings.Builder
		b.WriteString(p.Phase)
		for _, s := range p.Steps {
			b.WriteString(" " + s.Value + passMark(s.Pass))
		}
		parts = append(parts, b.String())
	}
	line := strings.Join(parts, "; ")
	if line == "" {
		line = "no step stored"
	}
	if t.Error != "" {
		line += " -- stopped: " + t.Error
	}
	return line
}

func passMark(pass bool) string {
	if pass {
		return "+"
	}
	return "-"
}

// Traces writes the find-max traces, grouped by workload and platform in
// the order given, one line per trial; nothing when there are none.
func Traces(w io.Writer, ts []Trace) error {
	if len(ts) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nfind-max traces: the load of each step, + met the QoS, - did not (steps: nearnative series RUN --json FILE)\n"); err != nil {
		return err
	}
	last := ""
	for _, t := range ts {
		if key := t.Workload + " on " + t.Platform; key != last {
			last = key
			if _, err := fmt.Fprintf(w, "%s\n", key); err != nil {
				return err
			}
		}
		label := fmt.Sprintf("round %d", t.Round)
		if t.Warmup {
			label += " (warm-up)"
		}
		if _, err := fmt.Fprintf(w, "  %s: %s\n", label, t.Line()); err != nil {
			return err
		}
	}
	return nil
}
