package workload

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// hostServer is a server on a host of a hosts file: its CPU time advances
// by step at each reading and its machine's busy ticks by busy.
type hostServer struct {
	counter
	name, boot string
	sut        bool
	busy       uint64 // ticks per reading
	ticks      *uint64
	reads      *int // MachineCPU calls on the host
}

func (h *hostServer) Machine() string { return h.name }

func (h *hostServer) MachineCPU(context.Context) (platform.MachineSample, error) {
	*h.reads++
	*h.ticks += h.busy
	s := sysinfo.CPUSample{At: time.Unix(0, int64(*h.ticks)*int64(time.Millisecond)),
		All: sysinfo.CPUTimes{User: *h.ticks, Idle: 1000 + *h.ticks}}
	return platform.MachineSample{Name: h.name, BootID: h.boot, SUT: h.sut, Sample: s}, nil
}

func TestMachinesOfTheAccount(t *testing.T) {
	local, err := sysinfo.BootID()
	if err != nil {
		t.Skip(err)
	}
	hz := float64(sysinfo.ClockTicks())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// servers: name, boot ID ("local" = this machine's), sut, ticks per reading
		servers []hostServer
		shared  bool // the hosts share one tick counter (one machine)
		// want: the machines named, the busy ticks summed (0: read here),
		// and which servers' CPU counts as on them
		machines []string
		busy     uint64
		on       time.Duration
	}{
		{"two sut machines and a role beside the driver",
			[]hostServer{{name: "sut1", boot: "b1", sut: true, busy: 100}, {name: "sut2", boot: "b2", sut: true, busy: 40},
				{name: "client1", boot: "b3", sut: false, busy: 500}},
			false, []string{"sut1", "sut2"}, 140, 2 * 300 * time.Millisecond},
		{"two hosts of one machine are read once",
			[]hostServer{{name: "sut1", boot: "b1", sut: true, busy: 100}, {name: "sut2", boot: "b1", sut: true, busy: 0}},
			true, []string{"sut1"}, 100, 2 * 300 * time.Millisecond},
		{"two servers on one host: the host is read once at each end",
			[]hostServer{{name: "sut1", boot: "b1", sut: true, busy: 100}, {name: "sut1", boot: "b1", sut: true, busy: 100}},
			false, []string{"sut1"}, 100, 2 * 300 * time.Millisecond},
		{"hosts of this machine (the test bed) are read here",
			[]hostServer{{name: "tb1", boot: "local", sut: true, busy: 100}, {name: "tb2", boot: "local", sut: false, busy: 100}},
			false, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var servers []platform.Server
			var shared uint64
			ticks, reads := map[string]*uint64{}, map[string]*int{}
			for i := range tc.servers {
				h := tc.servers[i]
				h.counter = counter{step: 300 * time.Millisecond}
				if h.boot == "local" {
					h.boot = local
				}
				if ticks[h.name] == nil {
					ticks[h.name], reads[h.name] = new(uint64), new(int)
				}
				h.ticks, h.reads = ticks[h.name], reads[h.name]
				if tc.shared {
					h.ticks = &shared
				}
				servers = append(servers, &h)
			}
			m, err := StartCPU(ctx, servers)
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.Stop(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for name, n := range reads {
				if *n > 2 {
					t.Errorf("host %s read %d times, want at most twice (the load's start and end)", name, *n)
				}
			}
			if !reflect.DeepEqual(a.Machines, tc.machines) {
				t.Errorf("machines %v, want %v", a.Machines, tc.machines)
			}
			if tc.machines == nil {
				if a.OutsideSeconds() != max(0, a.MachineSeconds()-a.Machine.IRQSeconds-a.Machine.SoftIRQSeconds-a.OwnSeconds()) {
					t.Errorf("this machine's account subtracts other than the run's own CPU")
				}
				return
			}
			if got, want := a.Machine.BusySeconds, float64(tc.busy)/hz; math.Abs(got-want) > 1e-9 {
				t.Errorf("busy %.3f s, want %.3f s (the sut machines' deltas added)", got, want)
			}
			if a.OnMachines != tc.on {
				t.Errorf("own CPU on the machines %v, want %v (the sut servers' only)", a.OnMachines, tc.on)
			}
			if got, want := a.OutsideSeconds(), max(0, float64(tc.busy)/hz-tc.on.Seconds()); math.Abs(got-want) > 1e-9 {
				t.Errorf("outside %.3f s, want %.3f s", got, want)
			}
		})
	}
}
