package icc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Marker starts each iperf3 report in a client endpoint's output; the
// client's number follows.
const Marker = "### nearnative iperf3 "

// Stream is what one iperf3 client measured.
type Stream struct {
	// BitsPerSecond is the receiver's rate (end.sum_received), the rate the
	// data actually arrived at.
	BitsPerSecond float64
	Seconds       float64
	Bytes         float64
	Retransmits   int
}

// ParseJSON reads one iperf3 -J report of a TCP test.
func ParseJSON(b []byte) (Stream, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived *struct {
				Seconds       float64 `json:"seconds"`
				Bytes         float64 `json:"bytes"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Stream{}, errors.New("empty iperf3 output")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Stream{}, fmt.Errorf("iperf3 output is not JSON: %w", err)
	}
	if r.Error != "" {
		return Stream{}, fmt.Errorf("iperf3: %s", r.Error)
	}
	s := r.End.SumReceived
	if s == nil {
		return Stream{}, errors.New("iperf3 output has no end.sum_received")
	}
	if !(s.BitsPerSecond > 0) || math.IsInf(s.BitsPerSecond, 0) {
		return Stream{}, fmt.Errorf("iperf3 received rate %v is not positive", s.BitsPerSecond)
	}
	return Stream{BitsPerSecond: s.BitsPerSecond, Seconds: s.Seconds, Bytes: s.Bytes, Retransmits: r.End.SumSent.Retransmits}, nil
}

// ParseEndpoint splits a client endpoint's output into its want iperf3
// reports (each after a Marker line) and parses them.
func ParseEndpoint(out []byte, want int) ([]Stream, error) {
	parts := map[int][]byte{}
	cur := -1
	var buf bytes.Buffer
	flush := func() {
		if cur >= 0 {
			parts[cur] = append([]byte(nil), buf.Bytes()...)
		}
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, Marker); ok {
			flush()
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return nil, fmt.Errorf("bad marker line %q", strings.TrimSpace(line))
			}
			cur = n
			continue
		}
		buf.WriteString(line)
	}
	flush()
	streams := make([]Stream, want)
	for i := 0; i < want; i++ {
		b, ok := parts[i]
		if !ok {
			return nil, fmt.Errorf("no report of iperf3 client %d (want %d)", i, want)
		}
		s, err := ParseJSON(b)
		if err != nil {
			return nil, fmt.Errorf("iperf3 client %d: %w", i, err)
		}
		streams[i] = s
	}
	return streams, nil
}

// LateMillis finds the "late by N ms" line a client script prints when it
// reached the start barrier after the start time; 0 when on time.
func LateMillis(stderr []byte) float64 {
	for _, line := range strings.Split(string(stderr), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "nearnative: late by "); ok {
			if n, err := strconv.ParseFloat(strings.TrimSuffix(rest, " ms"), 64); err == nil {
				return n
			}
		}
	}
	return 0
}
