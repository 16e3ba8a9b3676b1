package workload

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// The machines of a CPU account: whose /proc/stat the whole-machine
// figures come from. Locally that is this machine. When servers run on
// hosts of a hosts file (platform.MachineReporter), it is every distinct
// machine the system under test runs on: each sut host's counters are
// read through its agent at the start and end of the load and the deltas
// added up (sysinfo.SumDeltas), a machine shared by several hosts (the
// test bed's, by boot ID) counted once. The run's own CPU that is
// subtracted from them to find the outside CPU is what ran there: the
// servers on those machines and, when this machine is one of them, the
// platform helpers and the load generator here. The load generator on
// driver hosts is reported apart (client_cpu_pct), never in the machines'
// figures.

// machineSet is the set of machines a meter reads.
type machineSet struct {
	// local: this machine is one of them (a server runs here, or a host
	// shares this machine's kernel).
	local bool
	// remote are the other machines, one reporter each, in order of first
	// appearance; names their names.
	remote []platform.MachineReporter
	names  []string
	// onSet[i] says whether server i runs on one of the machines (read
	// only when remoteOnly: this machine's account subtracts all the run's
	// CPU).
	onSet []bool
	// localID is this machine's boot ID.
	localID string
}

// remoteOnly says whether the account's machines differ from this one
// alone, so that the figures are the hosts' rather than /proc/stat here.
func (ms *machineSet) remoteOnly() bool { return len(ms.remote) > 0 }

// planMachines reads each server's machine (once for servers that name
// the same one) and decides the set; it returns the first sample of each
// remote machine, in ms.remote's order.
func planMachines(ctx context.Context, servers []platform.Server) (*machineSet, []sysinfo.CPUSample, error) {
	ms := &machineSet{onSet: make([]bool, len(servers))}
	samples := make([]platform.MachineSample, len(servers))
	reporters := make([]platform.MachineReporter, len(servers))
	errs := make([]error, len(servers))
	readBy := map[string]int{} // Machine() -> the server read for it
	var wg sync.WaitGroup
	for i, s := range servers {
		r, ok := s.(platform.MachineReporter)
		if !ok {
			continue
		}
		reporters[i] = r
		if _, read := readBy[r.Machine()]; read {
			continue
		}
		readBy[r.Machine()] = i
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples[i], errs[i] = r.MachineCPU(ctx)
		}()
	}
	wg.Wait()
	for i, r := range reporters {
		if r != nil {
			k := readBy[r.Machine()]
			samples[i], errs[i] = samples[k], errs[k]
		}
	}
	var first []sysinfo.CPUSample
	ids := map[string]bool{}
	for i := range servers {
		if errs[i] != nil {
			return nil, nil, fmt.Errorf("reading a server's machine: %w", errs[i])
		}
		if reporters[i] == nil {
			ms.local = true // a server on this machine
			continue
		}
		if ms.localID == "" {
			id, err := sysinfo.BootID()
			if err != nil {
				return nil, nil, err
			}
			ms.localID = id
		}
		sm := samples[i]
		switch {
		case !sm.SUT:
		case sm.BootID == ms.localID:
			ms.local = true
		case !ids[sm.BootID]:
			ids[sm.BootID] = true
			ms.remote = append(ms.remote, reporters[i])
			ms.names = append(ms.names, sm.Name)
			first = append(first, sm.Sample)
		}
	}
	for i := range servers {
		if reporters[i] == nil {
			ms.onSet[i] = true
			continue
		}
		id := samples[i].BootID
		ms.onSet[i] = ids[id] || (ms.local && id == ms.localID)
	}
	return ms, first, nil
}

// read reads every remote machine's counters in parallel.
func (ms *machineSet) read(ctx context.Context) ([]sysinfo.CPUSample, error) {
	out := make([]sysinfo.CPUSample, len(ms.remote))
	errs := make([]error, len(ms.remote))
	var wg sync.WaitGroup
	for i, r := range ms.remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sm platform.MachineSample
			sm, errs[i] = r.MachineCPU(ctx)
			out[i] = sm.Sample
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("reading a sut host's CPU counters: %w", err)
		}
	}
	return out, nil
}

// machineNames is the record's name of the account's machines: nil for
// this machine alone.
func (ms *machineSet) machineNames() []string {
	if !ms.remoteOnly() {
		return nil
	}
	names := slices.Clone(ms.names)
	if ms.local {
		names = append([]string{"this machine"}, names...)
	}
	return names
}
