package fio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Summary is what one fio run measured, from its JSON output.
type Summary struct {
	// Version is fio's "fio version" field, e.g. "fio-3.33".
	Version string
	// Read and Write are nil when the job did no I/O in that direction.
	Read, Write *Direction
}

// Direction is one I/O direction of a job group.
type Direction struct {
	IOPS     float64
	TotalIOs int64
	// Runtime is how long the direction ran, without ramp time, in ms.
	RuntimeMs int64
	// P50us and P99us are completion-latency percentiles in microseconds.
	P50us, P99us float64
}

// TotalIOPS is read plus write IOPS.
func (s Summary) TotalIOPS() float64 {
	var t float64
	if s.Read != nil {
		t += s.Read.IOPS
	}
	if s.Write != nil {
		t += s.Write.IOPS
	}
	return t
}

type output struct {
	Version string `json:"fio version"`
	Jobs    []job  `json:"jobs"`
}

type job struct {
	Name  string     `json:"jobname"`
	Error int        `json:"error"`
	Read  *direction `json:"read"`
	Write *direction `json:"write"`
}

type direction struct {
	IOPS     float64 `json:"iops"`
	TotalIOs int64   `json:"total_ios"`
	Runtime  int64   `json:"runtime"`
	Clat     struct {
		N          int64              `json:"N"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// ErrNoDirectIO matches the error of a fio run that failed because the file
// system refused O_DIRECT.
var ErrNoDirectIO = errors.New("the file system does not support O_DIRECT (direct=1)")

var noDirect = regexp.MustCompile(`(?i)does not support direct=1|does not support O_DIRECT`)

// NoDirectIO reports whether fio's output says that the file system refused
// O_DIRECT (tmpfs before Linux 6.6, some overlayfs and FUSE mounts).
func NoDirectIO(out []byte) bool { return noDirect.Match(out) }

// FirstError returns the first line fio printed as an error ("fio: ..."),
// or "" when there is none.
func FirstError(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "fio: ") || strings.HasPrefix(line, "fio:") {
			return line
		}
	}
	return ""
}

// Parse reads fio --output-format=json output of a run with
// --group_reporting: exactly one job group, without error, that did I/O in
// the directions asked for (wantRead, wantWrite), each with its p50 and p99
// completion latency. fio may print error lines before the JSON object; they
// are skipped.
func Parse(out []byte, wantRead, wantWrite bool) (Summary, error) {
	start := jsonStart(out)
	if start < 0 {
		return Summary{}, errors.New("no JSON object in fio's output")
	}
	var o output
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	if err := dec.Decode(&o); err != nil {
		return Summary{}, fmt.Errorf("fio's JSON does not parse: %w", err)
	}
	if o.Version == "" {
		return Summary{}, errors.New(`fio's JSON lacks "fio version": not fio output`)
	}
	if len(o.Jobs) != 1 {
		return Summary{}, fmt.Errorf("want one job group (--group_reporting), found %d", len(o.Jobs))
	}
	j := o.Jobs[0]
	if j.Error != 0 {
		return Summary{}, fmt.Errorf("fio job %s ended with error %d", j.Name, j.Error)
	}
	s := Summary{Version: o.Version}
	var err error
	if wantRead {
		if s.Read, err = j.Read.summary("read"); err != nil {
			return Summary{}, err
		}
	}
	if wantWrite {
		if s.Write, err = j.Write.summary("write"); err != nil {
			return Summary{}, err
		}
	}
	return s, nil
}

// jsonStart finds the '{' that opens fio's JSON object: at the start of
// out or of a line.
func jsonStart(out []byte) int {
	if bytes.HasPrefix(out, []byte("{")) {
		return 0
	}
	i := bytes.Index(out, []byte("\n{"))
	if i < 0 {
		return -1
	}
	return i + 1
}

func (d *direction) summary(name string) (*Direction, error) {
	if d == nil {
		return nil, fmt.Errorf("fio's JSON has no %s section", name)
	}
	if !(d.IOPS > 0) || math.IsInf(d.IOPS, 0) || d.TotalIOs <= 0 {
		return nil, fmt.Errorf("fio did no %s I/O (iops %v, %d I/Os)", name, d.IOPS, d.TotalIOs)
	}
	p50, ok50 := percentile(d.Clat.Percentile, 50)
	p99, ok99 := percentile(d.Clat.Percentile, 99)
	if !ok50 || !ok99 {
		return nil, fmt.Errorf("fio's JSON lacks the %s completion-latency percentiles 50 and 99 (clat_ns.percentile)", name)
	}
	return &Direction{IOPS: d.IOPS, TotalIOs: d.TotalIOs, RuntimeMs: d.Runtime, P50us: p50 / 1000, P99us: p99 / 1000}, nil
}

// percentile finds the value of the p-th percentile; fio writes the keys as
// "50.000000".
func percentile(m map[string]float64, p float64) (float64, bool) {
	for k, v := range m {
		f, err := strconv.ParseFloat(k, 64)
		if err == nil && f == p && v > 0 && !math.IsInf(v, 0) {
			return v, true
		}
	}
	return 0, false
}
