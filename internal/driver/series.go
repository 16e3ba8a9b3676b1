package driver

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// Second is one second of a driver run: per operation, what completed in it.
// Seconds count from the start of the ramp-up.
type Second struct {
	Sec   int                 `json:"sec"`
	Phase string              `json:"phase"`
	Ops   map[string]SecondOp `json:"ops"`
}

// SecondOp is one operation's completions within one second. Latency has 2
// significant digits, enough for a chart.
type SecondOp struct {
	Count    int64 `json:"count"`
	Failures int64 `json:"failures"`
	Latency  *Hist `json:"latency"`
}

// compactSecond is a finished second kept encoded: an open histogram takes
// tens of kilobytes, an encoded one a few hundred bytes.
type compactSecond struct {
	sec   int
	phase string
	ops   map[string]compactOp
}

type compactOp struct {
	count, failures int64
	latency         json.RawMessage
}

type secAcc struct {
	count, failures int64
	latency         *Hist
}

// seriesRec collects per-second series. Completions are filed under the
// second they end in; a second is closed (encoded) once completions two
// seconds later arrive, or at the end.
type seriesRec struct {
	mu     sync.Mutex
	t0     time.Time
	phases Phases
	open   map[int]map[string]*secAcc
	done   []compactSecond
	spare  []*Hist
	// latest is the latest second a completion was filed under: seconds
	// are closed only when it moves, not at every completion.
	latest int
}

func newSeriesRec(t0 time.Time, p Phases) *seriesRec {
	return &seriesRec{t0: t0, phases: p, open: map[int]map[string]*secAcc{}}
}

func (s *seriesRec) add(op string, end time.Time, latency time.Duration, failed bool) {
	sec := int(end.Sub(s.t0) / time.Second)
	if sec < 0 {
		sec = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec > s.latest {
		// A new second: the ones two seconds back are complete.
		s.latest = sec
		for k := range s.open {
			if k < sec-1 {
				s.closeSec(k)
			}
		}
	}
	ops := s.open[sec]
	if ops == nil {
		ops = map[string]*secAcc{}
		s.open[sec] = ops
	}
	a := ops[op]
	if a == nil {
		a = &secAcc{latency: s.hist()}
		ops[op] = a
	}
	if failed {
		a.failures++
		return
	}
	a.count++
	a.latency.Record(latency)
}

func (s *seriesRec) hist() *Hist {
	if n := len(s.spare); n > 0 {
		h := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return h
	}
	return newSeriesHist()
}

// closeSec encodes second k and recycles its histograms.
func (s *seriesRec) closeSec(k int) {
	cs := compactSecond{sec: k, phase: s.phases.at(time.Duration(k) * time.Second), ops: map[string]compactOp{}}
	for op, a := range s.open[k] {
		c := compactOp{count: a.count, failures: a.failures}
		if a.count > 0 {
			c.latency, _ = a.latency.MarshalJSON() // encoding an in-memory histogram does not fail
		}
		cs.ops[op] = c
		a.latency.Reset()
		s.spare = append(s.spare, a.latency)
	}
	delete(s.open, k)
	s.done = append(s.done, cs)
}

// close ends the series and returns it in order.
func (s *seriesRec) close() []Second {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.open {
		s.closeSec(k)
	}
	s.spare = nil
	sort.Slice(s.done, func(i, j int) bool { return s.done[i].sec < s.done[j].sec })
	out := make([]Second, 0, len(s.done))
	for _, cs := range s.done {
		sec := Second{Sec: cs.sec, Phase: cs.phase, Ops: map[string]SecondOp{}}
		for op, c := range cs.ops {
			so := SecondOp{Count: c.count, Failures: c.failures}
			if c.latency != nil {
				h := &Hist{}
				if err := h.UnmarshalJSON(c.latency); err == nil {
					so.Latency = h
				}
			}
			sec.Ops[op] = so
		}
		out = append(out, sec)
	}
	// A completion that reached the lock after its second was closed (its
	// goroutine descheduled for over a second on a busy machine) opened
	// that second again: one entry per second, as storage keys them.
	return mergeSeries(nil, out)
}

// mergeSeries adds b's seconds into a's (same start, other driver process).
func mergeSeries(a, b []Second) []Second {
	idx := map[int]int{}
	for i, s := range a {
		idx[s.Sec] = i
	}
	for _, s := range b {
		i, ok := idx[s.Sec]
		if !ok {
			idx[s.Sec] = len(a)
			a = append(a, s)
			continue
		}
		for op, o := range s.Ops {
			x := a[i].Ops[op]
			x.Count += o.Count
			x.Failures += o.Failures
			if o.Latency != nil {
				if x.Latency == nil {
					x.Latency = newSeriesHist()
				}
				x.Latency.Merge(o.Latency)
			}
			a[i].Ops[op] = x
		}
	}
	sort.Slice(a, func(i, j int) bool { return a[i].Sec < a[j].Sec })
	return a
}

// Point is one row of a per-second series, for storage and charts.
type Point struct {
	Sec      int     `json:"sec"`
	Phase    string  `json:"phase"`
	Op       string  `json:"op"`
	Count    int64   `json:"count"`
	Failures int64   `json:"failures"`
	MeanUs   float64 `json:"mean_us"`
	P50Us    float64 `json:"p50_us"`
	P90Us    float64 `json:"p90_us"`
	P99Us    float64 `json:"p99_us"`
	MaxUs    float64 `json:"max_us"`
}

// Points flattens a series into rows, one per second and operation.
func Points(series []Second) []Point {
	var out []Point
	for _, s := range series {
		for _, op := range sortedKeys(s.Ops) {
			o := s.Ops[op]
			p := Point{Sec: s.Sec, Phase: s.Phase, Op: op, Count: o.Count, Failures: o.Failures}
			if o.Latency.Count() > 0 {
				us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
				p.MeanUs, p.P50Us, p.P90Us = us(o.Latency.Mean()), us(o.Latency.Quantile(0.5)), us(o.Latency.Quantile(0.9))
				p.P99Us, p.MaxUs = us(o.Latency.Quantile(0.99)), us(o.Latency.Max())
			}
			out = append(out, p)
		}
	}
	return out
}
