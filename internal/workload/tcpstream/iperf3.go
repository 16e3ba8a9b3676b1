package tcpstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Report is what one iperf3 -J run measured.
type Report struct {
	// Version is iperf3's own version string ("iperf 3.12").
	Version string
	// Reverse is true for a -R run (the server sent).
	Reverse bool
	// Streams is the number of parallel streams.
	Streams int
	// Seconds is the receiver's measured transfer time.
	Seconds float64
	// BytesReceived is what the receiving side counted over all streams.
	BytesReceived int64
	// BitsPerSecond is the receiver's throughput over all streams.
	BitsPerSecond float64
	// SenderBitsPerSecond is the sender's view, for comparison.
	SenderBitsPerSecond float64
	// Retransmits is the sender's count of retransmitted segments (the
	// server's in reverse mode).
	Retransmits int64
	// HostCPUPct and RemoteCPUPct are iperf3's own CPU use of the client and
	// of the server process.
	HostCPUPct, RemoteCPUPct float64
}

// report mirrors the parts of iperf3's JSON output this package reads.
type report struct {
	Start struct {
		Version   string `json:"version"`
		TestStart *struct {
			NumStreams int `json:"num_streams"`
			Reverse    int `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []json.RawMessage `json:"intervals"`
	End       struct {
		SumSent *struct {
			Bytes         int64    `json:"bytes"`
			BitsPerSecond float64  `json:"bits_per_second"`
			Retransmits   *float64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived *struct {
			Seconds       float64 `json:"seconds"`
			Bytes         int64   `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		CPU *struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
	Error string `json:"error"`
}

// decode reads the JSON object iperf3 -J printed. Text before the object
// (a warning iperf3 wrote before switching to JSON) is skipped.
func decode(out []byte) (report, error) {
	var r report
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return r, fmt.Errorf("no JSON object in iperf3's output")
	}
	dec := json.NewDecoder(bytes.NewReader(out[i:]))
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("iperf3 output is not valid JSON: %w", err)
	}
	return r, nil
}

// ParseJSON reads iperf3 -J output (iperf 3.12's layout). An "error" field,
// a missing end summary or a throughput that is not positive is an error:
// iperf3 3.12 exits 0 after a failed test in JSON mode, so the output is the
// only reliable verdict.
func ParseJSON(out []byte) (Report, error) {
	r, err := decode(out)
	if err != nil {
		return Report{}, err
	}
	if r.Error != "" {
		return Report{}, fmt.Errorf("iperf3 reported an error: %s", r.Error)
	}
	if r.Start.TestStart == nil {
		return Report{}, fmt.Errorf("iperf3 output has no start.test_start: the test did not start")
	}
	sent, recv := r.End.SumSent, r.End.SumReceived
	if sent == nil || recv == nil {
		return Report{}, fmt.Errorf("iperf3 output has no end.sum_sent/end.sum_received summary: the test did not finish")
	}
	if sent.Retransmits == nil {
		return Report{}, fmt.Errorf("iperf3 output has no end.sum_sent.retransmits (not a Linux TCP sender?)")
	}
	rep := Report{
		Version:             r.Start.Version,
		Reverse:             r.Start.TestStart.Reverse != 0,
		Streams:             r.Start.TestStart.NumStreams,
		Seconds:             recv.Seconds,
		BytesReceived:       recv.Bytes,
		BitsPerSecond:       recv.BitsPerSecond,
		SenderBitsPerSecond: sent.BitsPerSecond,
		Retransmits:         int64(*sent.Retransmits),
	}
	if r.End.CPU != nil {
		rep.HostCPUPct, rep.RemoteCPUPct = r.End.CPU.HostTotal, r.End.CPU.RemoteTotal
	}
	for name, v := range map[string]float64{"sum_received.bits_per_second": rep.BitsPerSecond,
		"sum_received.seconds": rep.Seconds, "sum_received.bytes": float64(rep.BytesReceived)} {
		if !(v > 0) || math.IsInf(v, 0) {
			return Report{}, fmt.Errorf("iperf3 end.%s = %v is not positive", name, v)
		}
	}
	if *sent.Retransmits < 0 {
		return Report{}, fmt.Errorf("iperf3 end.sum_sent.retransmits = %v is negative", *sent.Retransmits)
	}
	return rep, nil
}

// notStarted reports whether out is iperf3's JSON for a test that failed
// before any data moved (connection refused, or closed by a proxy whose
// backend is not listening yet), with iperf3's error text. Such a failure
// means the server is not ready yet and is worth retrying.
func notStarted(out []byte) (string, bool) {
	r, err := decode(out)
	if err != nil || r.Error == "" {
		return "", false
	}
	return r.Error, len(r.Intervals) == 0
}
