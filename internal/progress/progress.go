// Package progress shows a run's progress: a live bar with the current trial,
// rounds done and ETA on a terminal, or one plain line per event otherwise
// (CI logs, pipes).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
)

// New returns a bar when w is a terminal, else a line logger.
func New(w io.Writer) Display {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &Bar{w: w}
	}
	return &Lines{w: w}
}

// Display is what the engine reports progress to.
type Display interface {
	Begin(run runid.ID, planned, done, rounds int)
	TrialStart(round int, warmup bool, unit study.Unit)
	TrialEnd(t store.Trial)
	Logf(format string, args ...any)
	End()
}

// Lines prints one line per event with a timestamp.
type Lines struct {
	w       io.Writer
	mu      sync.Mutex
	planned int
	done    int
	rounds  int
	start   time.Time
	ran     int
}

func (l *Lines) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

// Begin implements Display.
func (l *Lines) Begin(run runid.ID, planned, done, rounds int) {
	l.planned, l.done, l.rounds, l.start = planned, done, rounds, time.Now()
	l.printf("run %s: %d trials planned, %d already stored", run, planned, done)
}

// TrialStart implements Display.
func (l *Lines) TrialStart(round int, warmup bool, u study.Unit) {
	l.printf("[%d/%d] %s", l.done+1, l.planned, trialLabel(round, l.rounds, warmup, u))
}

// trialLabel names a trial about to start for both displays: its round
// numbered from 1 out of the run's rounds (warm-up included), its workload
// and platform.
func trialLabel(round, rounds int, warmup bool, u study.Unit) string {
	kind := "round"
	if warmup {
		kind = "warm-up round"
	}
	return fmt.Sprintf("%s %d/%d: %s on %s", kind, round+1, rounds, u.Workload.Name, u.Platform.Name)
}

// TrialEnd implements Display.
func (l *Lines) TrialEnd(t store.Trial) {
	l.done++
	l.ran++
	l.printf("  %s  (%v)%s", summary(t), t.Duration.Round(100*time.Millisecond), eta(l.start, l.ran, l.planned-l.done))
}

// Logf implements Display.
func (l *Lines) Logf(format string, args ...any) {
	l.printf("%s", strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

// End implements Display.
func (l *Lines) End() {}

// Bar draws a progress bar on a terminal.
type Bar struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	planned int
	done    int
	rounds  int
}

// Begin implements Display.
func (b *Bar) Begin(run runid.ID, planned, done, rounds int) {
	b.planned, b.done, b.rounds = planned, done, rounds
	fmt.Fprintf(b.w, "run %s: %d trials planned, %d already stored\n", run, planned, done)
	b.bar = progressbar.NewOptions(planned,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
	)
	b.bar.Set(done)
}

// TrialStart implements Display.
func (b *Bar) TrialStart(round int, warmup bool, u study.Unit) {
	b.bar.Describe(trialLabel(round, b.rounds, warmup, u))
}

// TrialEnd implements Display.
func (b *Bar) TrialEnd(t store.Trial) {
	b.bar.Clear()
	fmt.Fprintf(b.w, "  r%02d %-12s %-14s %s\n", t.Round, t.Workload, t.Platform, summary(t))
	b.bar.Add(1)
}

// Logf implements Display.
func (b *Bar) Logf(format string, args ...any) {
	b.bar.Clear()
	fmt.Fprintln(b.w, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	b.bar.RenderBlank()
}

// End implements Display.
func (b *Bar) End() {
	if b.bar != nil {
		b.bar.Finish()
		b.bar.Exit()
	}
}

func summary(t store.Trial) string {
	if t.Error != "" {
		return "FAILED: " + firstLine(t.Error)
	}
	var parts []string
	for i, m := range t.Metrics {
		if i == 2 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.4g %s", m.Name, m.Value, m.Unit))
	}
	s := strings.Join(parts, ", ")
	if t.Warmup {
		s += " (warm-up, not counted)"
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func eta(start time.Time, ran, left int) string {
	if ran == 0 || left <= 0 {
		return ""
	}
	per := time.Since(start) / time.Duration(ran)
	return fmt.Sprintf(", ETA %v", (per * time.Duration(left)).Round(time.Second))
}
