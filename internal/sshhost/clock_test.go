package sshhost

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/hostfile"
	"github.com/nearnative/nearnative/internal/vmagent"
)

// TestCheckClocks: a host whose clock is off by more than the limit, the
// reading's uncertainty counted against it, is refused by name.
func TestCheckClocks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		off, rtt time.Duration
		refused  bool
	}{
		{"in sync", 200 * time.Microsecond, time.Millisecond, false},
		{"behind within the limit", -40 * time.Millisecond, 2 * time.Millisecond, false},
		{"ahead over the limit", 60 * time.Millisecond, time.Millisecond, true},
		{"behind over the limit", -51 * time.Millisecond, 0, true},
		{"within, but not once the round trip is counted", 45 * time.Millisecond, 12 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostfile.Host{Name: "sut1", Address: "192.0.2.1"}
			s := &Set{File: &hostfile.File{Hosts: []hostfile.Host{h}},
				conns: map[string]*Conn{"sut1": {Host: h, offset: vmagent.Offset{Offset: tc.off, RTT: tc.rtt}}}}
			err := s.CheckClocks(hostfile.DefaultClockOffsetMax)
			if tc.refused != (err != nil) {
				t.Fatalf("got %v, refused want %v", err, tc.refused)
			}
			if err != nil && (!errors.Is(err, ErrClock) || !strings.Contains(err.Error(), "host sut1")) {
				t.Fatalf("error %v does not name the host", err)
			}
		})
	}
}
