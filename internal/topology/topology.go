// Package topology describes what runs in a multi-server workload and who
// talks to whom: named roles (db, web, proxy, lb), each a server with a count,
// copies of the whole set (instances), the order in which they start, how each
// is probed for readiness, and where each may run (CPU placement, guests). It
// is data and pure functions only: package deploy starts a topology on a
// platform, and each platform decides how (processes, containers, guests,
// pods).
//
// A server builds its platform.Spec from the addresses of its peers, which
// the deployment resolves on the platform it runs on (loopback natively, a
// container's address on the run's network, an address inside a guest), so
// configuration files are rendered once the peers they name are known. A role
// may only ask for the addresses of roles it starts after.
package topology

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

// Layouts say how a container platform packs a topology's servers.
const (
	// ContainerPerServer gives every server group its own container (the
	// CloudStone seed: web and database in separate containers). A group
	// is one server unless roles share a Group.
	ContainerPerServer = "container-per-server"
	// ContainerPerInstance puts all servers of an instance in one container
	// under a small supervisor (the DVD Store seed: all tiers of an
	// instance in one container).
	ContainerPerInstance = "container-per-instance"
)

// Layouts lists the layouts in display order.
var Layouts = []string{ContainerPerServer, ContainerPerInstance}

// Pin modes of a placement.
const (
	// PinNone leaves the servers to the scheduler.
	PinNone = ""
	// PinSpread gives each pinned server one core of its own, round robin
	// over the cores left after the driver's.
	PinSpread = "spread"
)

// DefaultReadyTimeout bounds a server's readiness probe when its role sets none.
const DefaultReadyTimeout = 60 * time.Second

// DefaultOvercommit is the largest ratio of guest vCPUs to host CPUs a
// topology may ask for unless it states its own.
const DefaultOvercommit = 2.0

// ServerID names one server: the index-th server of a role in an instance.
type ServerID struct {
	Role     string
	Instance int
	Index    int
}

// Name is the server's name in container names, log files and reports:
// "i0-db-0".
func (id ServerID) Name() string {
	return "i" + strconv.Itoa(id.Instance) + "-" + id.Role + "-" + strconv.Itoa(id.Index)
}

// String is Name.
func (id ServerID) String() string { return id.Name() }

// Peers gives a server the addresses of the other servers of its instance as
// that server reaches them on its platform (host:port).
type Peers interface {
	// Addr is the address of port of the index-th server of role.
	Addr(role string, index int, port string) string
	// All is the address of port of every server of role, by index.
	All(role, port string) []string
}

// SpecFunc builds a server's spec once the peers it names have started.
type SpecFunc func(id ServerID, peers Peers) (platform.Spec, error)

// ReadyFunc probes a server at addr (host:port, as the host reaches it) and
// returns nil once it answers at the protocol level. An error that waiting
// will not change (the server answered with a refusal: a missing module, a
// wrong password) may say so with a method Final() bool returning true:
// the deployment then stops waiting at once.
type ReadyFunc func(ctx context.Context, addr string) error

// Role is one kind of server in a topology.
type Role struct {
	// Name is short and unique: [a-z][a-z0-9]*.
	Name string
	// Count is the number of servers of this role per instance (default 1).
	Count int
	// Ports are the names of the ports each server listens on; the Spec the
	// role builds must declare the same.
	Ports []string
	// After names the roles that must be started and ready before this one;
	// Spec may only ask Peers for those roles.
	After []string
	// Group puts roles of one instance into one container under the
	// container-per-server layout (nginx and PHP-FPM in one web container);
	// default: the role's own name.
	Group string
	// Entry marks the roles the load driver on the host connects to; only
	// their ports are published on NAT and proxy paths.
	Entry bool
	// ReadyPort names the port the readiness probe connects to (default the
	// first port); Ready is the probe (default: a TCP connect).
	ReadyPort string
	Ready     ReadyFunc
	// ReadyFor, when set, is the probe instead of Ready for probes that
	// need to know which server they probe (a path of its instance).
	ReadyFor     func(ctx context.Context, id ServerID, addr string) error
	ReadyTimeout time.Duration
	// Spec builds the server's spec.
	Spec SpecFunc
	// OnHost runs the role's servers as host processes beside the load
	// driver on every platform, as the seeds ran their load balancers on a
	// host of their own: only the other roles' platform differs. Roles it
	// names in After are reached at their host-side addresses.
	OnHost bool
	// GuestPerServer spreads the role's servers over the guests of the vm
	// platforms one by one (server k of the role, counted over all
	// instances, in guest k mod vms) instead of keeping them in their
	// instance's guest: the Redis scale-out seed ran one Redis per VM,
	// with the load balancers that shard over them elsewhere. The role's
	// servers then count towards the guests vms may ask for.
	GuestPerServer bool
	// OwnGuest puts the role's servers of each instance in a guest of
	// their own on the vm platforms, apart from the instance's other roles
	// (the CloudStone seed's two-VM variant: web server and database in
	// guests of their own). Each instance then fills one guest slot for
	// its other roles and one per OwnGuest role, dealt round robin over
	// the guests, and a vm platform needs at least that many guests.
	OwnGuest bool
	// GuestVCPUs, with OwnGuest, is the vCPU count of the role's guest
	// (the seed's 2-vCPU database VM beside a 6-vCPU web VM); 0: the
	// platform's. A guest that the round robin gives several slots gets
	// the largest of their counts.
	GuestVCPUs int
}

// Placement says which CPUs servers may run on.
type Placement struct {
	// Pin is PinNone or PinSpread.
	Pin string
	// PinRoles are the roles PinSpread pins (default: every role).
	PinRoles []string
	// Roles gives roles a CPU set of their own ("0-1"); it wins over Pin.
	Roles map[string]string
	// Instances gives instance i the CPU set Instances[i % len] (the seed's
	// "half the instances on half the cores"); Roles wins over it.
	Instances []string
	// DriverCPUs are the cores kept for the load driver: PinSpread skips them.
	DriverCPUs string
}

// Topology is a multi-server workload's servers.
type Topology struct {
	Roles []Role
	// Instances is the number of copies of the whole set (default 1).
	Instances int
	// Layout is ContainerPerServer (default) or ContainerPerInstance; it
	// matters to container platforms only.
	Layout string
	// VMs is the number of guests the vm platforms spread the instances
	// over (default 1: one guest holds everything).
	VMs int
	// Overcommit bounds guests x vCPUs / host CPUs (default DefaultOvercommit).
	Overcommit float64
	Placement  Placement
}

var roleName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// Validate checks the topology's structure: names, counts, references and
// that the start order has no cycle. It does not look at the machine; see
// Plan for that.
func (t Topology) Validate() error {
	if len(t.Roles) == 0 {
		return errors.New("topology: no roles")
	}
	if t.Instances < 0 {
		return fmt.Errorf("topology: instances %d: want at least 1", t.Instances)
	}
	if t.VMs < 0 {
		return fmt.Errorf("topology: vms %d: want at least 1", t.VMs)
	}
	if hold := t.maxGuests(); t.VMs > hold {
		if t.guestSlots() > 1 && hold == max(t.Instances, 1)*t.guestSlots() {
			return fmt.Errorf("topology: vms %d exceeds the %d guest(s) the topology can fill: %d instance(s) of %d guests each (role(s) %s in a guest of their own)",
				t.VMs, hold, max(t.Instances, 1), t.guestSlots(), strings.Join(t.ownGuests(), ", "))
		}
		return fmt.Errorf("topology: vms %d exceeds the %d instance(s): each guest holds whole instances (or one server of a role spread over guests)", t.VMs, hold)
	}
	if t.Layout != "" && !slices.Contains(Layouts, t.Layout) {
		return fmt.Errorf("topology: layout %q: want %s", t.Layout, strings.Join(Layouts, " or "))
	}
	if t.Overcommit < 0 {
		return fmt.Errorf("topology: overcommit %g: want a positive ratio", t.Overcommit)
	}
	roles := map[string]Role{}
	for _, r := range t.Roles {
		if _, dup := roles[r.Name]; dup {
			return fmt.Errorf("topology: role %s declared twice", r.Name)
		}
		if err := r.validate(); err != nil {
			return err
		}
		roles[r.Name] = r
	}
	for _, r := range t.Roles {
		for _, a := range r.After {
			if _, ok := roles[a]; !ok {
				return fmt.Errorf("topology: role %s starts after %q, which is no role of the topology (roles: %s)", r.Name, a, strings.Join(t.roleNames(), ", "))
			}
			if a == r.Name {
				return fmt.Errorf("topology: role %s starts after itself", r.Name)
			}
		}
	}
	if _, err := t.Waves(); err != nil {
		return err
	}
	return t.validatePlacement(roles)
}

// validate checks one role on its own: its name, count, spec, group, guest
// and ready port.
func (r Role) validate() error {
	if !roleName.MatchString(r.Name) {
		return fmt.Errorf("topology: role name %q: want lower-case letters and digits, starting with a letter", r.Name)
	}
	if r.Count < 0 {
		return fmt.Errorf("topology: role %s: count %d: want at least 1", r.Name, r.Count)
	}
	if r.Spec == nil {
		return fmt.Errorf("topology: role %s: no spec", r.Name)
	}
	if r.Group != "" && !roleName.MatchString(r.Group) {
		return fmt.Errorf("topology: role %s: group %q: want lower-case letters and digits", r.Name, r.Group)
	}
	if r.OwnGuest && (r.GuestPerServer || r.OnHost) {
		return fmt.Errorf("topology: role %s: a guest of its own excludes spreading its servers over guests and running beside the driver", r.Name)
	}
	if r.GuestVCPUs < 0 || (r.GuestVCPUs > 0 && !r.OwnGuest) {
		return fmt.Errorf("topology: role %s: guest vcpus %d: want a positive count, for a role in a guest of its own", r.Name, r.GuestVCPUs)
	}
	if r.ReadyPort != "" && !slices.Contains(r.Ports, r.ReadyPort) {
		return fmt.Errorf("topology: role %s: ready port %q is not one of its ports (%s)", r.Name, r.ReadyPort, strings.Join(r.Ports, ", "))
	}
	return nil
}

// validatePlacement checks the placement: the pinning, the roles it names
// (roles are the topology's) and every CPU set.
func (t Topology) validatePlacement(roles map[string]Role) error {
	p := t.Placement
	if p.Pin != PinNone && p.Pin != PinSpread {
		return fmt.Errorf("topology: pin %q: want %q or none", p.Pin, PinSpread)
	}
	for _, r := range p.PinRoles {
		if _, ok := roles[r]; !ok {
			return fmt.Errorf("topology: pin_roles names %q, which is no role (roles: %s)", r, strings.Join(t.roleNames(), ", "))
		}
	}
	for r, set := range p.Roles {
		if _, ok := roles[r]; !ok {
			return fmt.Errorf("topology: cpusets names %q, which is no role (roles: %s)", r, strings.Join(t.roleNames(), ", "))
		}
		if _, err := platform.ParseCPUSet(set); err != nil {
			return fmt.Errorf("topology: cpuset of role %s: %w", r, err)
		}
	}
	for i, set := range p.Instances {
		if _, err := platform.ParseCPUSet(set); err != nil {
			return fmt.Errorf("topology: cpuset of instance %d: %w", i, err)
		}
	}
	if p.DriverCPUs != "" {
		if _, err := platform.ParseCPUSet(p.DriverCPUs); err != nil {
			return fmt.Errorf("topology: driver cpus: %w", err)
		}
	}
	return nil
}

// maxGuests is how many guests the topology can fill: one per guest slot of
// an instance, or one per server of a role spread over guests.
func (t Topology) maxGuests() int {
	n := max(t.Instances, 1) * t.guestSlots()
	for _, r := range t.Roles {
		if r.GuestPerServer {
			n = max(n, max(t.Instances, 1)*max(r.Count, 1))
		}
	}
	return n
}

// guestSlots is the number of guests one instance fills: one for its
// roles, and one more per role that goes to a guest of its own.
func (t Topology) guestSlots() int { return 1 + len(t.ownGuests()) }

// ownGuests names the roles that go to a guest of their own.
func (t Topology) ownGuests() []string {
	var n []string
	for _, r := range t.Roles {
		if r.OwnGuest {
			n = append(n, r.Name)
		}
	}
	return n
}

func (t Topology) roleNames() []string {
	var n []string
	for _, r := range t.Roles {
		n = append(n, r.Name)
	}
	return n
}

// Role returns the named role.
func (t Topology) Role(name string) (Role, bool) {
	for _, r := range t.Roles {
		if r.Name == name {
			return r, true
		}
	}
	return Role{}, false
}

// Waves returns the roles in start order: every role of a wave starts after
// all roles of the earlier waves it names. Roles within a wave keep their
// declaration order.
func (t Topology) Waves() ([][]string, error) {
	placed := map[string]bool{}
	var waves [][]string
	for len(placed) < len(t.Roles) {
		var wave []string
		for _, r := range t.Roles {
			if placed[r.Name] {
				continue
			}
			ready := true
			for _, a := range r.After {
				if !placed[a] {
					ready = false
				}
			}
			if ready {
				wave = append(wave, r.Name)
			}
		}
		if len(wave) == 0 {
			var left []string
			for _, r := range t.Roles {
				if !placed[r.Name] {
					left = append(left, r.Name)
				}
			}
			return nil, fmt.Errorf("topology: the start order of roles %s is a cycle", strings.Join(left, ", "))
		}
		for _, n := range wave {
			placed[n] = true
		}
		waves = append(waves, wave)
	}
	return waves, nil
}

// Server is one server of a planned topology.
type Server struct {
	ID ServerID
	// Group names the container this server shares with others of its
	// instance under the chosen layout: "i0-web" (container-per-server) or
	// "i0" (container-per-instance).
	Group string
	// Guest is the index of the guest holding this server on vm platforms.
	Guest int
	Ports []string
	// Entry: the host reaches it (an entry role, or a peer of an OnHost role).
	Entry bool
	// OnHost: it runs beside the driver, not on the platform.
	OnHost bool
	// CPUSet is the placement's CPU list for the server, "" for none.
	CPUSet string
}

// Plan is a topology expanded for a machine: every server in start order,
// its group, guest and CPU set.
type Plan struct {
	Topology Topology
	// Servers are in start order: wave by wave, instance by instance.
	Servers []Server
	// Waves holds the indexes into Servers of each start wave.
	Waves [][]int
	// Layout and VMs are the topology's, defaults applied.
	Layout string
	VMs    int
	// GuestVCPUs is each guest's vCPU count on vm platforms (the
	// machine's VCPUs unless a role in a guest of its own asks for its
	// own count); nil when the machine is not a VM.
	GuestVCPUs []int
}

// Machine is what planning needs to know about the host.
type Machine struct {
	// CPUs are the host's online CPU numbers.
	CPUs []int
	// VCPUs is the vCPU count of each guest on vm platforms (0: not a VM).
	VCPUs int
	// GuestMemory is the memory of each guest in bytes on vm platforms (0:
	// not a VM), for workloads that must check that their data fits.
	GuestMemory int64
	// GuestContainers: each group is a container of its guest's engine
	// (vm-docker), so a group cannot span guests.
	GuestContainers bool
	// Pin is the platform variant's own pinning (its option pin: spread):
	// when the topology does not pin, its servers (of the placement's
	// PinRoles) are pinned as PinSpread pins them. PinNone leaves the
	// topology's placement alone.
	Pin string
}

// Plan validates the topology and expands it for machine m. It refuses what
// the machine cannot place: more spread-pinned servers than free cores, CPU
// sets naming CPUs the machine lacks, guests whose vCPUs exceed the
// overcommit, roles that go to a guest of their own with too few guests or
// in a container that would have to span guests.
func (t Topology) Plan(m Machine) (*Plan, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if m.Pin == PinSpread && t.Placement.Pin == PinNone {
		// The platform's pinning is for the servers on the platform, not
		// for those beside the driver.
		t.Placement.Pin = PinSpread
		if len(t.Placement.PinRoles) == 0 {
			for _, r := range t.Roles {
				if !r.OnHost {
					t.Placement.PinRoles = append(t.Placement.PinRoles, r.Name)
				}
			}
		}
	}
	p := &Plan{Topology: t, Layout: t.Layout, VMs: max(t.VMs, 1)}
	if p.Layout == "" {
		p.Layout = ContainerPerServer
	}
	instances := max(t.Instances, 1)
	slots := t.guestSlots()
	if m.VCPUs > 0 && p.VMs < slots {
		return nil, fmt.Errorf("topology: role(s) %s go to a guest of their own, so each instance needs %d guests, but vms is %d: set vms to at least %d",
			strings.Join(t.ownGuests(), ", "), slots, p.VMs, slots)
	}
	p.addServers(t, instances, slots)
	if m.GuestContainers {
		if err := p.groupsInOneGuest(); err != nil {
			return nil, err
		}
	}
	if err := p.place(m); err != nil {
		return nil, err
	}
	if m.VCPUs > 0 {
		p.sizeGuests(m.VCPUs)
	}
	if err := p.checkOvercommit(m); err != nil {
		return nil, err
	}
	return p, nil
}

// addServers lists every server of every instance, wave by wave (the
// start order), with its group (the container or process group it shares)
// and its guest.
func (p *Plan) addServers(t Topology, instances, slots int) {
	// slotOf is a role's guest slot within its instance: 0 for the roles
	// that share the instance's guest, 1... for those with one of their own.
	slotOf := map[string]int{}
	for i, n := range t.ownGuests() {
		slotOf[n] = i + 1
	}
	waves, _ := t.Waves()
	hostPeer := map[string]bool{}
	for _, r := range t.Roles {
		if r.OnHost {
			for _, a := range r.After {
				hostPeer[a] = true
			}
		}
	}
	for _, wave := range waves {
		var idx []int
		for inst := 0; inst < instances; inst++ {
			for _, name := range wave {
				r, _ := t.Role(name)
				for i := 0; i < max(r.Count, 1); i++ {
					guest := (inst*slots + slotOf[r.Name]) % p.VMs
					if r.GuestPerServer {
						guest = (inst*max(r.Count, 1) + i) % p.VMs
					}
					group := p.groupOf(r, inst, i)
					idx = append(idx, len(p.Servers))
					p.Servers = append(p.Servers, Server{
						ID:    ServerID{Role: r.Name, Instance: inst, Index: i},
						Group: group, Guest: guest, Ports: r.Ports,
						Entry: r.Entry || hostPeer[r.Name], OnHost: r.OnHost,
					})
				}
			}
		}
		p.Waves = append(p.Waves, idx)
	}
}

// groupOf names the group of server i of role r in instance inst: "host"
// beside the driver, the instance's with a container per server, else the
// role's (or its Group's) within the instance.
func (p *Plan) groupOf(r Role, inst, i int) string {
	group := "i" + strconv.Itoa(inst)
	if r.OnHost {
		return "host"
	}
	if p.Layout == ContainerPerServer {
		g := r.Group
		if g == "" {
			g = r.Name
		}
		group += "-" + g
		if r.Group == "" && max(r.Count, 1) > 1 {
			group += "-" + strconv.Itoa(i)
		}
	}
	return group
}

// checkOvercommit refuses guests whose vCPUs add up to more than the
// topology's overcommit limit (DefaultOvercommit) of the machine's CPUs.
func (p *Plan) checkOvercommit(m Machine) error {
	if m.VCPUs == 0 || len(m.CPUs) == 0 {
		return nil
	}
	limit := p.Topology.Overcommit
	if limit == 0 {
		limit = DefaultOvercommit
	}
	total, sizes := 0, make([]string, len(p.GuestVCPUs))
	for i, n := range p.GuestVCPUs {
		total += n
		sizes[i] = strconv.Itoa(n)
	}
	if ratio := float64(total) / float64(len(m.CPUs)); ratio > limit {
		what := fmt.Sprintf("%d guests x %d vCPUs", p.VMs, m.VCPUs)
		if total != p.VMs*m.VCPUs {
			what = fmt.Sprintf("%d guests of %s vCPUs", p.VMs, strings.Join(sizes, " + "))
		}
		return fmt.Errorf("topology: %s on %d CPUs is an overcommit of %.2g, above the limit %.2g: use fewer vms or vcpus, or raise the overcommit",
			what, len(m.CPUs), ratio, limit)
	}
	return nil
}

// sizeGuests gives each guest the platform's vcpus, or the largest count
// the roles in a guest of their own there ask for.
func (p *Plan) sizeGuests(vcpus int) {
	p.GuestVCPUs = make([]int, p.VMs)
	for _, s := range p.Servers {
		if s.OnHost {
			continue
		}
		n := vcpus
		if r, _ := p.Topology.Role(s.ID.Role); r.OwnGuest && r.GuestVCPUs > 0 {
			n = r.GuestVCPUs
		}
		p.GuestVCPUs[s.Guest] = max(p.GuestVCPUs[s.Guest], n)
	}
	for i, n := range p.GuestVCPUs {
		if n == 0 {
			p.GuestVCPUs[i] = vcpus
		}
	}
}

// groupsInOneGuest refuses a container whose servers the plan put in
// different guests (a role in a guest of its own that shares its container
// with other roles, as layout container-per-instance makes every role do).
func (p *Plan) groupsInOneGuest() error {
	guest := map[string]Server{}
	for _, s := range p.Servers {
		if s.OnHost {
			continue
		}
		first, ok := guest[s.Group]
		if !ok {
			guest[s.Group] = s
			continue
		}
		if first.Guest != s.Guest {
			return fmt.Errorf("topology: container %s would hold %s in guest %d and %s in guest %d, but a container runs in one guest: a role in a guest of its own needs a container of its own (layout %s, and no group shared with other roles)",
				s.Group, first.ID.Name(), first.Guest, s.ID.Name(), s.Guest, ContainerPerServer)
		}
	}
	return nil
}

// place fills in each server's CPU set.
func (p *Plan) place(m Machine) error {
	pl := p.Topology.Placement
	have := map[int]bool{}
	for _, c := range m.CPUs {
		have[c] = true
	}
	check := func(what, set string) error {
		cpus, err := platform.ParseCPUSet(set)
		if err != nil {
			return err
		}
		for _, c := range cpus {
			if len(have) > 0 && !have[c] {
				return fmt.Errorf("topology: %s names CPU %d, which this machine does not have (CPUs: %s)", what, c, FormatCPUs(m.CPUs))
			}
		}
		return nil
	}
	for r, set := range pl.Roles {
		if err := check("the cpuset of role "+r, set); err != nil {
			return err
		}
	}
	for i, set := range pl.Instances {
		if err := check("the cpuset of instance "+strconv.Itoa(i), set); err != nil {
			return err
		}
	}
	var free []int
	if pl.Pin == PinSpread {
		driver := map[int]bool{}
		if pl.DriverCPUs != "" {
			if err := check("the driver's cpus", pl.DriverCPUs); err != nil {
				return err
			}
			d, _ := platform.ParseCPUSet(pl.DriverCPUs)
			for _, c := range d {
				driver[c] = true
			}
		}
		for _, c := range m.CPUs {
			if !driver[c] {
				free = append(free, c)
			}
		}
		sort.Ints(free)
	}
	next := 0
	var spread []string
	for i := range p.Servers {
		s := &p.Servers[i]
		switch {
		case pl.Roles[s.ID.Role] != "":
			s.CPUSet = pl.Roles[s.ID.Role]
		case pl.Pin == PinSpread && (len(pl.PinRoles) == 0 || slices.Contains(pl.PinRoles, s.ID.Role)):
			spread = append(spread, s.ID.Name())
			if next < len(free) {
				s.CPUSet = strconv.Itoa(free[next])
			}
			next++
		case len(pl.Instances) > 0:
			s.CPUSet = pl.Instances[s.ID.Instance%len(pl.Instances)]
		}
	}
	if len(spread) > len(free) {
		return fmt.Errorf("topology: pin: spread needs one core for each of %d servers (%s), but only %d core(s) are free after the driver's (%s): pin fewer roles, use fewer servers, or drop the pin",
			len(spread), strings.Join(spread, ", "), len(free), FormatCPUs(free))
	}
	return nil
}

// Group returns the servers of the named group, in start order.
func (p *Plan) Group(name string) []Server {
	var out []Server
	for _, s := range p.Servers {
		if s.Group == name {
			out = append(out, s)
		}
	}
	return out
}

// Groups returns the group names in order of first start.
func (p *Plan) Groups() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range p.Servers {
		if !seen[s.Group] {
			seen[s.Group] = true
			out = append(out, s.Group)
		}
	}
	return out
}

// Guests returns, per guest index, the servers it holds in start order
// (OnHost servers run in none).
func (p *Plan) Guests() [][]Server {
	out := make([][]Server, p.VMs)
	for _, s := range p.Servers {
		if !s.OnHost {
			out[s.Guest] = append(out[s.Guest], s)
		}
	}
	return out
}

// HasOnHost reports whether some servers run beside the driver.
func (p *Plan) HasOnHost() bool {
	for _, s := range p.Servers {
		if s.OnHost {
			return true
		}
	}
	return false
}

// GroupCPUs is the CPU set of a group of servers run together (a
// container's, on the Docker platforms; a shared cgroup's, natively) whose
// members are confined to sets (one per member, "" for an unconfined one):
// their union when every member is confined; otherwise "" (a member without
// a set may use any CPU, and so may the group).
func GroupCPUs(sets []string) string {
	var all []int
	seen := map[int]bool{}
	for _, s := range sets {
		if s == "" {
			return ""
		}
		cpus, _ := platform.ParseCPUSet(s)
		for _, c := range cpus {
			if !seen[c] {
				seen[c] = true
				all = append(all, c)
			}
		}
	}
	if len(all) == 0 {
		return ""
	}
	return FormatCPUs(all)
}

// FormatCPUs writes CPU numbers as a Linux CPU list ("0-2,5").
func FormatCPUs(cpus []int) string {
	c := slices.Clone(cpus)
	sort.Ints(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, strconv.Itoa(c[i])+"-"+strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
