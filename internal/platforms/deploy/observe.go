package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Layout is the static record of where the deployment's servers run; see
// Observer for what happens on them during the load.
func (d *Deployment) Layout() placement.Record {
	l := placement.Record{Places: d.Places()}
	placeOf := map[string]string{}
	for _, p := range l.Places {
		for _, s := range p.Servers {
			placeOf[s] = p.Name
		}
	}
	for _, r := range d.Servers() {
		name := r.ID.Name()
		l.Servers = append(l.Servers, placement.Server{Name: name, Role: r.ID.Role, Instance: r.ID.Instance,
			Place: placeOf[name], CPUs: r.CPUSet, OnHost: r.OnHost, MigrationsPerSec: -1})
	}
	if n, err := sysinfo.NUMANodes(); err == nil && n <= 1 {
		l.Note = "one NUMA node: the cross-node memory and interrupt effects the seeds saw on two sockets cannot appear on this machine"
	}
	return l
}

// Observer measures per-CPU busy time and each server's migrations while the
// load runs. Start it right before the load and call Layout right after.
type Observer struct {
	d    *Deployment
	cpu0 sysinfo.CPUSample
	mig0 map[string]int64
}

// Observe starts observing the deployment.
func (d *Deployment) Observe(ctx context.Context) (*Observer, error) {
	mig, err := d.Migrations(ctx)
	if err != nil {
		return nil, err
	}
	cpu, err := sysinfo.ReadCPU()
	if err != nil {
		return nil, err
	}
	return &Observer{d: d, cpu0: cpu, mig0: mig}, nil
}

// Layout returns the deployment's layout with what was observed since
// Observe: each host CPU's busy share and each server's migrations per
// second.
func (o *Observer) Layout(ctx context.Context) (placement.Record, error) {
	cpu, err := sysinfo.ReadCPU()
	if err != nil {
		return placement.Record{}, err
	}
	mig, err := o.d.Migrations(ctx)
	if err != nil {
		return placement.Record{}, err
	}
	delta := o.cpu0.Delta(cpu)
	l := o.d.Layout()
	l.Interval = delta.Interval
	for i, id := range delta.CPUIDs {
		l.CPUs = append(l.CPUs, placement.CPU{ID: id, Busy: delta.PerCPUBusy[i]})
	}
	sec := delta.Interval.Seconds()
	for i := range l.Servers {
		before, ok0 := o.mig0[l.Servers[i].Name]
		after, ok1 := mig[l.Servers[i].Name]
		if ok0 && ok1 && sec > 0 && after >= before {
			l.Servers[i].MigrationsPerSec = float64(after-before) / sec
		}
	}
	return l, nil
}

// Summary is one line for a trial's notes: the CPU spread and the busiest
// migrating server.
func Summary(l placement.Record) string {
	lo, hi := l.Spread()
	s := fmt.Sprintf("per-CPU busy %.0f%%..%.0f%% over %v", lo*100, hi*100, l.Interval.Round(time.Millisecond))
	var top placement.Server
	for _, sv := range l.Migrations() {
		if sv.MigrationsPerSec > top.MigrationsPerSec {
			top = sv
		}
	}
	if top.Name != "" {
		s += fmt.Sprintf("; most migrations: %s %.0f/s", top.Name, top.MigrationsPerSec)
	}
	return s
}
