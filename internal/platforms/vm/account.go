package vm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// wholeGuestCPU is what a VM server's CPU time counts.
const wholeGuestCPU = "the whole guest: the qemu process's CPU time on the host (guest kernel, every guest process, emulation and I/O threads)"

// hostCPU is the CPU time the guest's qemu process has used on the host, all
// its threads: the whole guest, as the host pays for it. It is the only
// figure of a guest comparable with the cgroup CPU of a native server or a
// container, since a guest's own clock does not see what the host spends on
// it.
func (g *guest) hostCPU(ctx context.Context) (time.Duration, error) {
	if g.cfg.remote != nil { // QEMU on a sut host: its agent reads /proc there
		d, err := g.cfg.remote.on.Agent().CPUTime(ctx, g.pid)
		if err != nil {
			return 0, fmt.Errorf("sut host %s: the guest's CPU time: %w", g.cfg.remote.on.Name(), err)
		}
		return d, nil
	}
	if g.cmd == nil || g.cmd.Process == nil {
		return 0, errors.New("guest not started")
	}
	st, err := sysinfo.ReadProcStat(g.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	return st.CPUWithChildren(), nil
}

// CPUTime implements platform.CPUReporter: the whole guest (see hostCPU).
func (s *server) CPUTime(ctx context.Context) (time.Duration, error) { return s.g.hostCPU(ctx) }

// CPUSource implements platform.CPUDescriber.
func (s *server) CPUSource() string { return wholeGuestCPU }

// CPUTime implements platform.CPUReporter: the whole guest (see hostCPU),
// its Docker engine included.
func (s *dockerServer) CPUTime(ctx context.Context) (time.Duration, error) { return s.g.hostCPU(ctx) }

// CPUSource implements platform.CPUDescriber.
func (s *dockerServer) CPUSource() string { return wholeGuestCPU }

// Degradations implements platform.Degrader: emulation without KVM and the
// user-mode network fallback, once the platform has prepared; with guests
// on several sut hosts, each host's that booted one.
func (p *Platform) Degradations() []string {
	out := p.degradations(len(p.siblings) > 0)
	for _, s := range p.siblings {
		for _, d := range s.degradations(true) {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// degradations are p's own; named says which sut host's.
func (p *Platform) degradations(named bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	if p.ready && p.probe.Emulated() {
		d := EmulatedNote + ": KVM unavailable (" + p.probe.KVMReason + "), QEMU emulates the CPU"
		if named && p.on != nil {
			d += " on sut host " + p.on.Name()
		}
		out = append(out, d)
	}
	if p.userNet != "" {
		out = append(out, "QEMU user-mode network (slirp) instead of a bridge: "+p.userNet)
	}
	return out
}

// Size is the guest size every boot of the platform gets: its vCPUs and its
// memory in MiB (the vcpus and vm_memory options, or the defaults). A
// topology role's guest of its own may have its own vCPU count
// (topology.Plan.GuestVCPUs); its memory is this one.
func (p *Platform) Size() (vcpus int, memMiB int64) { return p.vcpus, p.memMiB }

// guestProcCPU is what the CPU time of a server of a topology in a guest
// counts. Several servers share a guest, so the qemu process cannot be
// charged to each: the guest's kernel's per-process figure is used, and the
// guest kernel's and QEMU's own work is left outside it.
const guestProcCPU = "the server's process tree as the guest's kernel counts it (its guest's kernel and QEMU's own work are not in it)"

// CPUSource implements platform.CPUDescriber.
func (s *guestProc) CPUSource() string { return guestProcCPU }
