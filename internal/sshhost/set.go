package sshhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/hostfile"
)

// ErrClock is matched by the error refusing hosts whose clocks are too far
// off this machine's.
var ErrClock = errors.New("clock offset too large")

// Set is every host of a hosts file, connected.
type Set struct {
	File  *hostfile.File
	conns map[string]*Conn
}

// ConnectAll connects to every host of f at once; on any error it closes
// what it opened and returns every host's error. It then refuses hosts
// whose clock offset exceeds f's threshold.
func ConnectAll(ctx context.Context, f *hostfile.File, o Options) (*Set, error) {
	if o.KnownHosts == "" {
		o.KnownHosts = f.KnownHosts
	}
	s := &Set{File: f, conns: map[string]*Conn{}}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, h := range f.Hosts {
		wg.Add(1)
		go func(h hostfile.Host) {
			defer wg.Done()
			c, err := Connect(ctx, h, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			s.conns[h.Name] = c
		}(h)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.CheckClocks(f.OffsetMax()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// CheckClocks refuses hosts whose clock is further than limit from this
// machine's (the reading's uncertainty counted against the host).
func (s *Set) CheckClocks(limit time.Duration) error {
	var errs []error
	for _, h := range s.File.Hosts {
		c := s.conns[h.Name]
		off := c.offset.Offset
		if c.offset.Bound() > limit {
			errs = append(errs, fmt.Errorf("%w: host %s: clock %v from this machine's (± %v), over the %v allowed: synchronise both clocks (chrony or systemd-timesyncd against the same server), or raise clock_offset_max in the hosts file",
				ErrClock, h.Name, off.Round(time.Microsecond), (c.offset.RTT/2).Round(time.Microsecond), limit))
		}
	}
	return errors.Join(errs...)
}

// Conn returns the connection of the host named name.
func (s *Set) Conn(name string) *Conn { return s.conns[name] }

// SUT returns the sut host that runs server role.
func (s *Set) SUT(role string) *Conn { return s.conns[s.File.SUTFor(role).Name] }

// Client returns the client host of servers on sut: the file's driver
// hosts.
func (s *Set) Client(sut *Conn) *ClientHost {
	var ds []*Conn
	for _, h := range s.File.Drivers() {
		ds = append(ds, s.conns[h.Name])
	}
	return NewClientHost(ds, sut.Host.Address)
}

// Clocks describes every host's clock offset, one line each, for the run's
// notes.
func (s *Set) Clocks() []string {
	var out []string
	for _, h := range s.File.Hosts {
		c := s.conns[h.Name]
		out = append(out, fmt.Sprintf("host %s (%s, roles %s): clock offset %v ± %v (NTP-style over its agent, best of 8)", h.Name, h.Address,
			strings.Join(h.Roles, ","), c.offset.Offset.Round(time.Microsecond), (c.offset.RTT/2).Round(time.Microsecond)))
	}
	return out
}

// Close stops every agent (and so the servers they run) and closes every
// connection.
func (s *Set) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.File.Hosts))
	for i, h := range s.File.Hosts {
		c := s.conns[h.Name]
		if c == nil {
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = c.Close()
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}
