package driver

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram ranges: latencies are recorded in microseconds from 1 us to one
// hour (long polls included), with 3 significant digits (HdrHistogram's
// usual setting) for trial totals and 2 for the per-second series.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histDigits  = 3
	seriesDigit = 2
)

// Hist is a latency distribution: an HdrHistogram in microseconds. It is not
// safe for concurrent use; the driver records into one per shard and merges.
// A Hist encodes to JSON as HdrHistogram's compressed V2 base64 form, so
// child driver processes send theirs to the parent losslessly.
type Hist struct{ h *hdr.Histogram }

// NewHist returns an empty histogram with 3 significant digits.
func NewHist() *Hist { return &Hist{hdr.New(histLowest, histHighest, histDigits)} }

// newSeriesHist returns an empty histogram with 2 significant digits, for
// per-second series (a seventh of the memory).
func newSeriesHist() *Hist { return &Hist{hdr.New(histLowest, histHighest, seriesDigit)} }

// Record adds one latency; values outside the range are clamped to it.
func (h *Hist) Record(d time.Duration) {
	us := d.Microseconds()
	if us < histLowest {
		us = histLowest
	}
	if us > histHighest {
		us = histHighest
	}
	_ = h.h.RecordValue(us) // in range by construction
}

// Merge adds o's counts to h.
func (h *Hist) Merge(o *Hist) {
	if o != nil && o.h != nil {
		h.h.Merge(o.h)
	}
}

// Reset empties h.
func (h *Hist) Reset() { h.h.Reset() }

// Count is the number of recorded latencies.
func (h *Hist) Count() int64 {
	if h == nil || h.h == nil {
		return 0
	}
	return h.h.TotalCount()
}

// Quantile returns the q-quantile, q in [0, 1] (the highest value
// equivalent, within the histogram's precision, to the recorded one).
func (h *Hist) Quantile(q float64) time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.ValueAtQuantile(q*100)) * time.Microsecond
}

// Mean is the mean latency.
func (h *Hist) Mean() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Mean() * float64(time.Microsecond))
}

// Max is the largest latency (within precision).
func (h *Hist) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Max()) * time.Microsecond
}

// FractionWithin is the share of latencies at or below d: those whose whole
// bucket lies at or below d, so that FractionWithin(d) >= q exactly when
// Quantile(q) <= d.
func (h *Hist) FractionWithin(d time.Duration) float64 {
	n := h.Count()
	if n == 0 {
		return math.NaN()
	}
	limit := d.Microseconds()
	var in int64
	for _, b := range h.h.Distribution() {
		if b.To > limit {
			break
		}
		in += b.Count
	}
	return float64(in) / float64(n)
}

// MarshalJSON encodes h as HdrHistogram's compressed V2 base64 string.
func (h *Hist) MarshalJSON() ([]byte, error) {
	if h == nil || h.h == nil {
		return []byte("null"), nil
	}
	b, err := h.h.EncodeV2()
	if err != nil {
		return nil, fmt.Errorf("encoding a latency histogram: %w", err)
	}
	return json.Marshal(string(b))
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding a latency histogram: %w", err)
	}
	d, err := hdr.Decode([]byte(s))
	if err != nil {
		return fmt.Errorf("decoding a latency histogram: %w", err)
	}
	h.h = d
	return nil
}
