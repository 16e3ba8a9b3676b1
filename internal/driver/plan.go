package driver

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Segment is a stretch of an open-loop rate plan: the rate goes linearly
// from From to To requests per second over Duration (From == To: constant).
type Segment struct {
	Duration time.Duration `json:"duration"`
	From     float64       `json:"from"`
	To       float64       `json:"to"`
}

// Plan is an open-loop rate plan: segments one after the other, the last
// one's final rate held until the driver stops. Request i is due at
// Offset(i) after the start, whatever happened to the requests before it.
type Plan struct {
	Segments []Segment `json:"segments"`
}

// Constant is a plan of one rate.
func Constant(rate float64) Plan {
	return Plan{Segments: []Segment{{Duration: 0, From: rate, To: rate}}}
}

// Steps is a plan of constant rates, each held for its duration.
func Steps(step time.Duration, rates ...float64) Plan {
	var p Plan
	for _, r := range rates {
		p.Segments = append(p.Segments, Segment{Duration: step, From: r, To: r})
	}
	return p
}

// Ramp goes linearly from one rate to another over d, then holds the second.
func Ramp(from, to float64, d time.Duration) Plan {
	return Plan{Segments: []Segment{{Duration: d, From: from, To: to}}}
}

// Validate refuses rates that are not positive and segments without a
// length (but the last, which may hold its rate open-ended).
func (p Plan) Validate() error {
	if len(p.Segments) == 0 {
		return fmt.Errorf("rate plan: no segments")
	}
	for i, s := range p.Segments {
		if !(s.From > 0) || !(s.To > 0) || math.IsInf(s.From, 0) || math.IsInf(s.To, 0) {
			return fmt.Errorf("rate plan segment %d: rate %g..%g requests/s: rates must be positive", i+1, s.From, s.To)
		}
		if s.Duration < 0 || s.Duration == 0 && i < len(p.Segments)-1 {
			return fmt.Errorf("rate plan segment %d: duration %v: only the last segment may be open-ended", i+1, s.Duration)
		}
	}
	return nil
}

// Scale returns the plan with every rate multiplied by f (a child driver's
// share).
func (p Plan) Scale(f float64) Plan {
	out := Plan{Segments: make([]Segment, len(p.Segments))}
	for i, s := range p.Segments {
		out.Segments[i] = Segment{Duration: s.Duration, From: s.From * f, To: s.To * f}
	}
	return out
}

// RateAt is the plan's rate at offset t.
func (p Plan) RateAt(t time.Duration) float64 {
	for _, s := range p.Segments {
		if t < s.Duration {
			return s.From + (s.To-s.From)*t.Seconds()/s.Duration.Seconds()
		}
		t -= s.Duration
	}
	return p.Segments[len(p.Segments)-1].To
}

// Offset is when request i (from 0) is due, counted from the plan's start:
// the time at which the plan's cumulative count reaches i.
func (p Plan) Offset(i int64) time.Duration {
	n := float64(i)
	var base time.Duration
	for _, s := range p.Segments {
		d := s.Duration.Seconds()
		inSeg := (s.From + s.To) / 2 * d
		if s.Duration == 0 || n < inSeg {
			return base + segOffset(s, n)
		}
		n -= inSeg
		base += s.Duration
	}
	last := p.Segments[len(p.Segments)-1]
	return base + seconds(n/last.To)
}

// seconds converts to a Duration rounding to the nearest nanosecond, not
// down: 1025/125 s is 8199999999.999999 ns in floating point, and a request
// due at exactly the end of a phase must not fall a nanosecond inside it
// (dueIn counts it out, the collector's time test would count it in).
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// segOffset solves From*t + (To-From)/(2D)*t^2 = n for t within one segment.
func segOffset(s Segment, n float64) time.Duration {
	if s.From == s.To || s.Duration == 0 {
		return seconds(n / s.From)
	}
	a := (s.To - s.From) / (2 * s.Duration.Seconds())
	b := s.From
	t := (-b + math.Sqrt(b*b+4*a*n)) / (2 * a)
	return seconds(t)
}

// Count is how many requests are due before offset t.
func (p Plan) Count(t time.Duration) float64 {
	var n float64
	for _, s := range p.Segments {
		if s.Duration == 0 || t < s.Duration {
			x := t.Seconds()
			if s.Duration == 0 {
				return n + s.From*x
			}
			return n + s.From*x + (s.To-s.From)/(2*s.Duration.Seconds())*x*x
		}
		n += (s.From + s.To) / 2 * s.Duration.Seconds()
		t -= s.Duration
	}
	return n + p.Segments[len(p.Segments)-1].To*t.Seconds()
}

// String is "constant 1000/s" or the segments.
func (p Plan) String() string {
	var parts []string
	for _, s := range p.Segments {
		rate := fmt.Sprintf("%g/s", s.From)
		if s.From != s.To {
			rate = fmt.Sprintf("%g->%g/s", s.From, s.To)
		}
		if s.Duration > 0 {
			rate += " for " + s.Duration.String()
		}
		parts = append(parts, rate)
	}
	return strings.Join(parts, ", then ")
}
