package remote_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/runid"
)

// scriptRunner is a driver host whose `agent --route add` answers as told
// (the real one would change this machine's routes; package hostroute's
// tests cover it).
type scriptRunner struct {
	name   string
	route  host.Job // what the route script returns
	unrout *[]string
}

func (r scriptRunner) Name() string               { return r.name }
func (r scriptRunner) Self() string               { return "/var/tmp/nearnative/nearnative" }
func (r scriptRunner) ClockOffset() time.Duration { return 0 }
func (r scriptRunner) RunJob(_ context.Context, argv []string, _ []byte) (host.Job, error) {
	if len(argv) > 3 && argv[2] == "--route" && argv[3] == "add" {
		return r.route, nil
	}
	*r.unrout = append(*r.unrout, r.name)
	return host.Job{}, nil
}

// drivers is a client host made of driver hosts.
type drivers struct {
	host.Host
	rs []host.Runner
}

func (d drivers) Drivers() []host.Runner { return d.rs }

func TestRouteDrivers(t *testing.T) {
	dst, gw := netip.MustParsePrefix("172.17.0.0/16"), netip.MustParseAddr("10.0.0.2")
	ok := func(src string) host.Job { return host.Job{Stdout: []byte(src + "\n")} }
	tests := []struct {
		name        string
		jobs        []host.Job
		from        []string
		unavailable bool
		undone      []string // hosts whose route is removed after the call
	}{
		{"two drivers", []host.Job{ok("10.0.0.3"), ok("10.0.0.4")}, []string{"10.0.0.3", "10.0.0.4"}, false, nil},
		{"a route of its own is refused, the first undone", []host.Job{ok("10.0.0.3"), {ExitCode: 3, Stderr: []byte("it routes 172.17.0.0/16 already")}}, nil, true, []string{"d0"}},
		{"a failure undoes", []host.Job{ok("10.0.0.3"), {ExitCode: 2, Stderr: []byte("RTNETLINK answers: Operation not permitted")}}, nil, false, []string{"d0"}},
		{"no source address", []host.Job{{Stdout: []byte("\n")}}, nil, false, []string{"d0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var undone []string
			var rs []host.Runner
			for i, j := range tt.jobs {
				rs = append(rs, scriptRunner{name: "d" + string(rune('0'+i)), route: j, unrout: &undone})
			}
			from, undo, err := remote.RouteDrivers(context.Background(), drivers{rs: rs}, runid.New(), dst, gw)
			if tt.from != nil {
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, a := range from {
					got = append(got, a.String())
				}
				if strings.Join(got, " ") != strings.Join(tt.from, " ") {
					t.Errorf("from %v, want %v", got, tt.from)
				}
				if err := undo(context.Background()); err != nil || len(undone) != len(rs) {
					t.Errorf("undo: %v, undone %v", err, undone)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, platform.ErrUnavailable) != tt.unavailable {
				t.Errorf("unavailable %v, want %v: %v", errors.Is(err, platform.ErrUnavailable), tt.unavailable, err)
			}
			if strings.Join(undone, " ") != strings.Join(tt.undone, " ") {
				t.Errorf("undone %v, want %v", undone, tt.undone)
			}
		})
	}
}
