package tcprr

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Summary is what sockperf ping-pong --full-rtt printed. Times are round
// trips in microseconds.
type Summary struct {
	// Version is sockperf's version ("3.7-no.git").
	Version string
	// TotalSeconds, TotalSent and TotalReceived cover the whole timed run
	// (-t seconds), warm-up period included.
	TotalSeconds             float64
	TotalSent, TotalReceived int64
	// ValidSeconds, ValidSent and ValidReceived cover the period the
	// statistics are taken over (sockperf leaves out the first 400 ms and
	// the tail of the run).
	ValidSeconds             float64
	ValidSent, ValidReceived int64
	// MeanUs and StdDevUs are sockperf's avg-rtt and its standard deviation.
	MeanUs, StdDevUs float64
	// Percentiles of the round trip, and its extremes.
	P50Us, P90Us, P99Us, P999Us, MinUs, MaxUs float64
	// Observations is the number of round trips the statistics cover.
	Observations int64
	// Dropped, Duplicated and OutOfOrder are sockperf's message checks.
	Dropped, Duplicated, OutOfOrder int64
}

// TransactionsPerSec is the round-trip rate over the statistics period.
func (s Summary) TransactionsPerSec() float64 {
	return float64(s.ValidReceived) / s.ValidSeconds
}

var (
	ansi     = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	keyValue = regexp.MustCompile(`([A-Za-z][A-Za-z -]*?)\s*=\s*(-?[0-9.]+)`)
	version  = regexp.MustCompile(`== version #(\S+) ==`)
	pctLine  = regexp.MustCompile(`^---> percentile ([0-9.]+) =\s*([0-9.]+)$`)
	obsLine  = regexp.MustCompile(`^---> <(MAX|MIN)> observation =\s*([0-9.]+)$`)
	totalObs = regexp.MustCompile(`^Total (\d+) observations`)
)

// fields returns the name=number pairs of a summary line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range keyValue.FindAllStringSubmatch(line, -1) {
		m[strings.TrimSpace(kv[1])] = kv[2]
	}
	return m
}

// checkSummary completes a summary with its percentile lines (pcts) and
// checks that sockperf printed exactly one server's statistics (the counts
// of its [Total Run], [Valid Duration], avg-rtt and server lines) and
// figures that make sense.
func checkSummary(s Summary, pcts map[string]float64, haveTotal, haveValid, haveMean, servers int) (Summary, error) {
	switch {
	case haveValid == 0 || haveMean == 0:
		return Summary{}, fmt.Errorf("no sockperf summary ([Valid Duration] and avg-rtt lines): the test did not run")
	case haveTotal == 0:
		return Summary{}, fmt.Errorf("no [Total Run] line in sockperf's output")
	case servers > 1 || haveValid > 1 || haveMean > 1:
		return Summary{}, fmt.Errorf("sockperf printed statistics for %d servers; want one", max(servers, haveValid, haveMean))
	}
	for _, p := range []struct {
		key string
		dst *float64
	}{{"50.000", &s.P50Us}, {"90.000", &s.P90Us}, {"99.000", &s.P99Us}, {"99.900", &s.P999Us}, {"MIN", &s.MinUs}, {"MAX", &s.MaxUs}} {
		v, ok := pcts[p.key]
		if !ok {
			return Summary{}, fmt.Errorf("sockperf output has no %s percentile line", p.key)
		}
		*p.dst = v
	}
	switch {
	case !(s.ValidSeconds > 0) || s.ValidReceived <= 0:
		return Summary{}, fmt.Errorf("sockperf counted %d round trips in %v s: nothing was measured", s.ValidReceived, s.ValidSeconds)
	case !(s.MeanUs > 0) || !(s.P50Us > 0) || !(s.P99Us > 0):
		return Summary{}, fmt.Errorf("sockperf round trips not positive: mean %v, p50 %v, p99 %v us", s.MeanUs, s.P50Us, s.P99Us)
	case s.P99Us < s.P50Us || s.MaxUs < s.P99Us || s.MinUs > s.P50Us:
		return Summary{}, fmt.Errorf("sockperf percentiles out of order: min %v, p50 %v, p99 %v, max %v us", s.MinUs, s.P50Us, s.P99Us, s.MaxUs)
	}
	return s, nil
}

// ParseSummary reads the output of sockperf ping-pong --full-rtt (sockperf
// 3.7's layout; colour escapes are ignored). sockperf exits 0 even when it
// could not connect, so a missing summary is an error, quoting sockperf's own
// ERROR line when it printed one. Output in one-way latency (without
// --full-rtt: sockperf's RTT/2) is refused rather than halved silently.
func ParseSummary(out []byte) (Summary, error) {
	var s Summary
	var errLine string
	var haveTotal, haveValid, haveMean, servers int
	pcts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(ansi.ReplaceAllString(sc.Text(), ""))
		line = strings.TrimSpace(strings.TrimPrefix(line, "sockperf:"))
		var err error
		switch {
		case strings.Contains(line, "ERROR:") || strings.Contains(line, "Invalid"):
			if errLine == "" {
				errLine = line
				if i := strings.Index(line, "ERROR:"); i >= 0 {
					errLine = line[i:]
				}
			}
		case version.MatchString(line):
			s.Version = version.FindStringSubmatch(line)[1]
		case strings.HasPrefix(line, "[Total Run]"):
			haveTotal++
			err = numbers(fields(line), map[string]any{"RunTime": &s.TotalSeconds, "SentMessages": &s.TotalSent, "ReceivedMessages": &s.TotalReceived})
		case strings.HasPrefix(line, "[Valid Duration]"):
			haveValid++
			err = numbers(fields(line), map[string]any{"RunTime": &s.ValidSeconds, "SentMessages": &s.ValidSent, "ReceivedMessages": &s.ValidReceived})
		case strings.Contains(line, "Printing statistics for Server"):
			servers++
		case strings.HasPrefix(line, "====> avg-latency"):
			return Summary{}, fmt.Errorf("sockperf reported one-way latency (avg-latency, RTT/2); run it with --full-rtt")
		case strings.HasPrefix(line, "====> avg-rtt"):
			haveMean++
			err = numbers(fields(line), map[string]any{"avg-rtt": &s.MeanUs, "std-dev": &s.StdDevUs})
		case strings.HasPrefix(line, "# dropped messages"):
			err = numbers(fields(line), map[string]any{"dropped messages": &s.Dropped,
				"duplicated messages": &s.Duplicated, "out-of-order messages": &s.OutOfOrder})
		case totalObs.MatchString(line):
			s.Observations, _ = strconv.ParseInt(totalObs.FindStringSubmatch(line)[1], 10, 64)
		case pctLine.MatchString(line):
			m := pctLine.FindStringSubmatch(line)
			pcts[m[1]], err = number(m[2])
		case obsLine.MatchString(line):
			m := obsLine.FindStringSubmatch(line)
			pcts[m[1]], err = number(m[2])
		}
		if err != nil {
			return Summary{}, fmt.Errorf("sockperf line %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Summary{}, fmt.Errorf("reading sockperf output: %w", err)
	}
	if errLine != "" {
		return Summary{}, fmt.Errorf("sockperf reported: %s", errLine)
	}
	return checkSummary(s, pcts, haveTotal, haveValid, haveMean, servers)
}

// numbers parses the named fields into the pointed-to float64s and int64s.
func numbers(f map[string]string, dst map[string]any) error {
	for name, p := range dst {
		v, ok := f[name]
		if !ok {
			return fmt.Errorf("no %s", name)
		}
		n, err := number(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch d := p.(type) {
		case *float64:
			*d = n
		case *int64:
			if n != math.Trunc(n) {
				return fmt.Errorf("%s: %q is not a whole number", name, v)
			}
			*d = int64(n)
		}
	}
	return nil
}

// number parses a finite number.
func number(s string) (float64, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return n, nil
}
