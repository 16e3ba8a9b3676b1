package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// Names of the parameters every topology workload shares (TopologyParams).
const (
	ParamInstances       = "instances"
	ParamLayout          = "layout"
	ParamVMs             = "vms"
	ParamPin             = "pin"
	ParamPinRoles        = "pin_roles"
	ParamCPUSets         = "cpusets"
	ParamInstanceCPUSets = "instance_cpusets"
	ParamDriverCPUs      = "driver_cpus"
	ParamOvercommit      = "overcommit"
)

// TopologyDefaults are a workload's defaults for the shared topology
// parameters.
type TopologyDefaults struct {
	Instances, QuickInstances int
	Layout                    string
	VMs                       int
	// InstancesHelp says where the default comes from (the seed's value,
	// how it is scaled).
	InstancesHelp string
}

// TopologyParams declares the parameters every topology workload accepts:
// instances, layout, guests, pinning.
func TopologyParams(d TopologyDefaults) []Param {
	layout := d.Layout
	if layout == "" {
		layout = topology.ContainerPerServer
	}
	quick := ""
	if d.QuickInstances > 0 {
		quick = strconv.Itoa(d.QuickInstances)
	}
	return []Param{
		{Name: ParamInstances, Type: Int, Default: strconv.Itoa(max(d.Instances, 1)), Quick: quick, Min: 1, HasMin: true,
			Help: "copies of the whole set of servers, each with its own ports, directories and data" + helpSuffix(d.InstancesHelp)},
		{Name: ParamLayout, Type: String, Default: layout, Enum: topology.Layouts,
			Help: "Docker, VM-Docker: a container per server (group) or one container per instance holding all its servers"},
		{Name: ParamVMs, Type: Int, Default: strconv.Itoa(max(d.VMs, 1)), Min: 1, HasMin: true,
			Help: "vm platforms: guests sharing the instances equally, each with the platform's vcpus and vm_memory"},
		{Name: ParamPin, Type: String, Default: "none", Enum: []string{"none", topology.PinSpread},
			Help: "spread: each server (of pin_roles) on a core of its own, round robin over the cores not in driver_cpus"},
		{Name: ParamPinRoles, Type: String, Default: "", Help: "roles that pin: spread applies to, comma-separated (empty: all)"},
		{Name: ParamCPUSets, Type: String, Default: "", Help: "CPU sets per role, e.g. \"db:0-1;web:2-3\" (wins over pin)"},
		{Name: ParamInstanceCPUSets, Type: String, Default: "", Help: "CPU sets instances take in turn, e.g. \"0-7;8-15\" (half the instances on half the cores)"},
		{Name: ParamDriverCPUs, Type: String, Default: "", Help: "cores kept for the load driver (pin: spread skips them)"},
		{Name: ParamOvercommit, Type: Float, Default: strconv.FormatFloat(topology.DefaultOvercommit, 'g', -1, 64), Min: 0.1, HasMin: true,
			Help: "vm platforms: the largest guests x vCPUs / host CPUs allowed"},
	}
}

func helpSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// ApplyTopology sets t's instances, layout, guests and placement from the
// shared parameters in v, and validates the result.
func ApplyTopology(v Values, t *topology.Topology) error {
	t.Instances = v.Int(ParamInstances)
	t.Layout = v.String(ParamLayout)
	t.VMs = v.Int(ParamVMs)
	t.Overcommit = v.Float(ParamOvercommit)
	pl := topology.Placement{DriverCPUs: v.String(ParamDriverCPUs)}
	if v.String(ParamPin) == topology.PinSpread {
		pl.Pin = topology.PinSpread
	}
	if s := strings.TrimSpace(v.String(ParamPinRoles)); s != "" {
		for _, r := range strings.Split(s, ",") {
			pl.PinRoles = append(pl.PinRoles, strings.TrimSpace(r))
		}
	}
	if s := strings.TrimSpace(v.String(ParamCPUSets)); s != "" {
		pl.Roles = map[string]string{}
		for _, part := range strings.Split(s, ";") {
			role, set, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok || role == "" || set == "" {
				return fmt.Errorf("parameter %s: %q is not role:cpus (e.g. \"db:0-1;web:2-3\")", ParamCPUSets, part)
			}
			pl.Roles[strings.TrimSpace(role)] = strings.TrimSpace(set)
		}
	}
	if s := strings.TrimSpace(v.String(ParamInstanceCPUSets)); s != "" {
		for _, set := range strings.Split(s, ";") {
			pl.Instances = append(pl.Instances, strings.TrimSpace(set))
		}
	}
	t.Placement = pl
	if err := t.Validate(); err != nil {
		return err
	}
	// What the machine cannot place is refused before anything starts
	// (guests' vCPUs are checked when the platform plans).
	_, err := t.Plan(topology.Machine{CPUs: deploy.HostCPUs()})
	return err
}

// Deploy starts topology topo on the trial's platform (roles marked OnHost
// beside the driver, on t.Host), records every server's command and place in
// res, and returns the deployment and its stop, to be deferred with the
// Run's named error: a topology that cannot be stopped and removed spoils
// the trial, so stop joins that failure into *err.
func Deploy(ctx context.Context, t Trial, topo topology.Topology, res *Result) (*deploy.Deployment, func(err *error), error) {
	opt := deploy.Options{Log: t.Log}
	if t.Host != nil {
		opt.Host = t.Host
	}
	d, err := deploy.Deploy(ctx, t.Platform, t.Name, topo, opt)
	if err != nil {
		return nil, nil, err
	}
	res.Commands = append(res.Commands, d.Commands()...)
	res.Where = append(res.Where, d.Where()...)
	stop := func(err *error) {
		if serr := d.Stop(context.WithoutCancel(ctx)); serr != nil {
			*err = errors.Join(*err, fmt.Errorf("stopping the topology: %w", serr))
		}
	}
	return d, stop, nil
}
