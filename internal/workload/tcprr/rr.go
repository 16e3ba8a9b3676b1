package tcprr

import (
	"fmt"
	"strings"

	"github.com/nearnative/nearnative/internal/benchbin"
)

// ParseRR reads the output of nn-rr client into a Summary: its measured
// window is both the "total" and the "valid" period, as nn-rr leaves its
// warm-up out of everything it counts. A run that failed or printed no
// statistics is an error quoting nn-rr's own message when there is one.
func ParseRR(out []byte) (Summary, error) {
	o := benchbin.Parse(out)
	var s Summary
	s.Version = "nn-rr " + o.Get("build")
	num := func(key string, dst *float64) error {
		v, err := o.Float(key)
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
	var tx float64
	for _, f := range []struct {
		key string
		dst *float64
	}{
		{"transactions", &tx}, {"seconds", &s.ValidSeconds},
		{"rtt-mean-us", &s.MeanUs}, {"rtt-stddev-us", &s.StdDevUs},
		{"rtt-min-us", &s.MinUs}, {"rtt-p50-us", &s.P50Us}, {"rtt-p90-us", &s.P90Us},
		{"rtt-p99-us", &s.P99Us}, {"rtt-p999-us", &s.P999Us}, {"rtt-max-us", &s.MaxUs},
	} {
		if err := num(f.key, f.dst); err != nil {
			if msg := rrError(out); msg != "" {
				return Summary{}, fmt.Errorf("nn-rr reported: %s", msg)
			}
			return Summary{}, fmt.Errorf("no nn-rr statistics (%v): the test did not run", err)
		}
	}
	s.TotalSeconds = s.ValidSeconds
	s.TotalSent, s.TotalReceived = int64(tx), int64(tx)
	s.ValidSent, s.ValidReceived, s.Observations = int64(tx), int64(tx), int64(tx)
	switch {
	case !(s.ValidSeconds > 0) || s.ValidReceived <= 0:
		return Summary{}, fmt.Errorf("nn-rr counted %d round trips in %v s: nothing was measured", s.ValidReceived, s.ValidSeconds)
	case !(s.MeanUs > 0) || !(s.P50Us > 0) || !(s.P99Us > 0):
		return Summary{}, fmt.Errorf("nn-rr round trips not positive: mean %v, p50 %v, p99 %v us", s.MeanUs, s.P50Us, s.P99Us)
	case s.P99Us < s.P50Us || s.MaxUs < s.P99Us || s.MinUs > s.P50Us:
		return Summary{}, fmt.Errorf("nn-rr percentiles out of order: min %v, p50 %v, p99 %v, max %v us", s.MinUs, s.P50Us, s.P99Us, s.MaxUs)
	}
	return s, nil
}

// rrError returns nn-rr's own error line ("nn-rr: connecting to ...").
func rrError(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "nn-rr: ") {
			return strings.TrimPrefix(strings.TrimSpace(l), "nn-rr: ")
		}
	}
	return ""
}
