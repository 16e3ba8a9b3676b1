package topology

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
)

func spec(ServerID, Peers) (platform.Spec, error) { return platform.Spec{}, nil }

// scaleout is the Redis scale-out shape: redis x N behind twemproxy x K
// behind one HAProxy.
func scaleout(n, k int) Topology {
	return Topology{Roles: []Role{
		{Name: "redis", Count: n, Ports: []string{"redis"}, Spec: spec},
		{Name: "proxy", Count: k, Ports: []string{"proxy"}, After: []string{"redis"}, Spec: spec},
		{Name: "lb", Ports: []string{"lb"}, After: []string{"proxy"}, Entry: true, Spec: spec},
	}}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		t    Topology
		want string
	}{
		{"no roles", Topology{}, "no roles"},
		{"bad name", Topology{Roles: []Role{{Name: "Web", Spec: spec}}}, "role name"},
		{"duplicate", Topology{Roles: []Role{{Name: "a", Spec: spec}, {Name: "a", Spec: spec}}}, "declared twice"},
		{"unknown peer", Topology{Roles: []Role{{Name: "web", After: []string{"db"}, Spec: spec}}}, `starts after "db", which is no role`},
		{"self", Topology{Roles: []Role{{Name: "web", After: []string{"web"}, Spec: spec}}}, "after itself"},
		{"cycle", Topology{Roles: []Role{{Name: "a", After: []string{"b"}, Spec: spec}, {Name: "b", After: []string{"a"}, Spec: spec}}}, "cycle"},
		{"no spec", Topology{Roles: []Role{{Name: "a"}}}, "no spec"},
		{"ready port", Topology{Roles: []Role{{Name: "a", Ports: []string{"x"}, ReadyPort: "y", Spec: spec}}}, "ready port"},
		{"layout", Topology{Layout: "pod-per-moon", Roles: []Role{{Name: "a", Spec: spec}}}, "layout"},
		{"vms above instances", Topology{VMs: 3, Instances: 2, Roles: []Role{{Name: "a", Spec: spec}}}, "vms 3 exceeds"},
		{"pin mode", Topology{Placement: Placement{Pin: "tight"}, Roles: []Role{{Name: "a", Spec: spec}}}, "pin"},
		{"pin role", Topology{Placement: Placement{Pin: PinSpread, PinRoles: []string{"db"}}, Roles: []Role{{Name: "a", Spec: spec}}}, "pin_roles"},
		{"cpuset role", Topology{Placement: Placement{Roles: map[string]string{"a": "x"}}, Roles: []Role{{Name: "a", Spec: spec}}}, "cpuset of role a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := scaleout(8, 2).Validate(); err != nil {
		t.Fatalf("scale-out topology: %v", err)
	}
}

func TestWaves(t *testing.T) {
	top := Topology{Roles: []Role{
		{Name: "lb", After: []string{"app"}, Spec: spec},
		{Name: "db", Spec: spec},
		{Name: "broker", Spec: spec},
		{Name: "app", After: []string{"db", "broker"}, Spec: spec},
	}}
	w, err := top.Waves()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(w))
	for i, wave := range w {
		got[i] = strings.Join(wave, ",")
	}
	if want := "db,broker|app|lb"; strings.Join(got, "|") != want {
		t.Fatalf("waves %v, want %s", got, want)
	}
}

func names(ss []Server) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.ID.Name()+"@"+s.Group+"/"+s.CPUSet)
	}
	return strings.Join(n, " ")
}

func TestPlanGroupsAndOrder(t *testing.T) {
	web := Topology{Instances: 2, Roles: []Role{
		{Name: "db", Ports: []string{"sql"}, Spec: spec},
		{Name: "php", Group: "web", After: []string{"db"}, Spec: spec},
		{Name: "nginx", Group: "web", After: []string{"php"}, Entry: true, Spec: spec},
	}}
	p, err := web.Plan(Machine{CPUs: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := "i0-db-0@i0-db/ i1-db-0@i1-db/ i0-php-0@i0-web/ i1-php-0@i1-web/ i0-nginx-0@i0-web/ i1-nginx-0@i1-web/"
	if got := names(p.Servers); got != want {
		t.Fatalf("servers\n got %s\nwant %s", got, want)
	}
	if g := p.Groups(); strings.Join(g, ",") != "i0-db,i1-db,i0-web,i1-web" {
		t.Fatalf("groups %v", g)
	}
	web.Layout = ContainerPerInstance
	p, _ = web.Plan(Machine{CPUs: []int{0, 1}})
	if g := p.Groups(); strings.Join(g, ",") != "i0,i1" {
		t.Fatalf("container-per-instance groups %v", g)
	}
	// Roles with a count and no group get a container each.
	p, _ = scaleout(2, 1).Plan(Machine{CPUs: []int{0, 1}})
	if g := p.Groups(); strings.Join(g, ",") != "i0-redis-0,i0-redis-1,i0-proxy,i0-lb" {
		t.Fatalf("scale-out groups %v", g)
	}
}

// planCase is a topology planned on a machine: the plan as the test's show
// writes it, or the error wanted.
type planCase struct {
	name    string
	top     Topology
	m       Machine
	want    string
	wantErr string
}

// checkPlans plans each case and compares show(plan) with want, or the
// error with wantErr.
func checkPlans(t *testing.T, tests []planCase, show func(*Plan) string) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.top.Plan(tt.m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Plan() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := show(p); got != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestPlanPlacement(t *testing.T) {
	four := Machine{CPUs: []int{0, 1, 2, 3}}
	tests := []planCase{
		{"none", scaleout(2, 1), four, "i0-redis-0@i0-redis-0/ i0-redis-1@i0-redis-1/ i0-proxy-0@i0-proxy/ i0-lb-0@i0-lb/", ""},
		{"spread the redis after the driver's core",
			withPlacement(scaleout(3, 1), Placement{Pin: PinSpread, PinRoles: []string{"redis"}, DriverCPUs: "0"}), four,
			"i0-redis-0@i0-redis-0/1 i0-redis-1@i0-redis-1/2 i0-redis-2@i0-redis-2/3 i0-proxy-0@i0-proxy/ i0-lb-0@i0-lb/", ""},
		{"spread needs a core each",
			withPlacement(scaleout(4, 1), Placement{Pin: PinSpread, PinRoles: []string{"redis"}, DriverCPUs: "0"}), four,
			"", "needs one core for each of 4 servers"},
		{"role cpuset wins",
			withPlacement(scaleout(1, 1), Placement{Roles: map[string]string{"lb": "0"}, Instances: []string{"2-3"}}), four,
			"i0-redis-0@i0-redis/2-3 i0-proxy-0@i0-proxy/2-3 i0-lb-0@i0-lb/0", ""},
		{"a CPU the machine lacks",
			withPlacement(scaleout(1, 1), Placement{Roles: map[string]string{"lb": "7"}}), four, "", "CPU 7"},
		{"the platform pins what the topology leaves alone",
			withPlacement(scaleout(2, 1), Placement{PinRoles: []string{"redis"}}), Machine{CPUs: []int{0, 1}, Pin: PinSpread},
			"i0-redis-0@i0-redis-0/0 i0-redis-1@i0-redis-1/1 i0-proxy-0@i0-proxy/ i0-lb-0@i0-lb/", ""},
		{"the platform's pin is refused where cores lack",
			scaleout(2, 1), Machine{CPUs: []int{0, 1}, Pin: PinSpread}, "", "needs one core for each of 4 servers"},
		{"the platform's pin leaves roles beside the driver alone",
			onHost(scaleout(2, 1), "proxy", "lb"), Machine{CPUs: []int{0, 1}, Pin: PinSpread},
			"i0-redis-0@i0-redis-0/0 i0-redis-1@i0-redis-1/1 i0-proxy-0@host/ i0-lb-0@host/", ""},
		{"the topology's own pin wins over the platform's",
			withPlacement(scaleout(1, 1), Placement{Roles: map[string]string{"redis": "1"}}), Machine{CPUs: []int{0, 1}, Pin: PinSpread},
			"i0-redis-0@i0-redis/1 i0-proxy-0@i0-proxy/0 i0-lb-0@i0-lb/1", ""},
		{"overcommit", Topology{VMs: 2, Instances: 2, Roles: []Role{{Name: "a", Spec: spec}}}, Machine{CPUs: []int{0, 1}, VCPUs: 4}, "", "overcommit of 4"},
		{"overcommit stated", Topology{VMs: 2, Instances: 2, Overcommit: 4, Roles: []Role{{Name: "a", Spec: spec}}}, Machine{CPUs: []int{0, 1}, VCPUs: 4},
			"i0-a-0@i0-a/ i1-a-0@i1-a/", ""},
	}
	checkPlans(t, tests, func(p *Plan) string { return names(p.Servers) })
}

func TestPlanGuests(t *testing.T) {
	top := Topology{Instances: 4, VMs: 2, Roles: []Role{{Name: "db", Spec: spec}, {Name: "web", After: []string{"db"}, Spec: spec}}}
	p, err := top.Plan(Machine{CPUs: []int{0, 1, 2, 3}, VCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	g := p.Guests()
	if len(g) != 2 || len(g[0]) != 4 || len(g[1]) != 4 {
		t.Fatalf("guests %v", g)
	}
	for _, s := range g[1] {
		if s.ID.Instance%2 != 1 {
			t.Errorf("%s on guest 1: instances go round robin over guests", s.ID.Name())
		}
	}
}

func withPlacement(t Topology, p Placement) Topology { t.Placement = p; return t }

func onHost(t Topology, roles ...string) Topology {
	for i := range t.Roles {
		for _, r := range roles {
			if t.Roles[i].Name == r {
				t.Roles[i].OnHost = true
			}
		}
	}
	return t
}

// TestPlanGuestPerServer: one Redis per guest, the proxies in the first.
func TestPlanGuestPerServer(t *testing.T) {
	top := scaleout(4, 1)
	top.Roles[0].GuestPerServer = true
	top.VMs = 4
	p, err := top.Plan(Machine{CPUs: []int{0, 1, 2, 3}, VCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	g := p.Guests()
	if len(g) != 4 {
		t.Fatalf("%d guests, want 4", len(g))
	}
	for i, servers := range g {
		want := 1
		if i == 0 {
			want = 3 // redis 0, the proxy and the lb
		}
		if len(servers) != want || servers[0].ID != (ServerID{Role: "redis", Index: i}) {
			t.Errorf("guest %d holds %s, want redis %d first of %d", i, names(servers), i, want)
		}
	}
	top.VMs = 5
	if _, err := top.Plan(Machine{CPUs: []int{0, 1, 2, 3}, VCPUs: 1}); err == nil || !strings.Contains(err.Error(), "vms 5 exceeds") {
		t.Errorf("5 guests for 4 spread servers: %v", err)
	}
}

func TestFormatCPUs(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0,1,2,5": "0-2,5", "3,1": "1,3", "": ""} {
		cpus, _ := platform.ParseCPUSet(in)
		if in == "" {
			cpus = nil
		}
		if got := FormatCPUs(cpus); got != want {
			t.Errorf("FormatCPUs(%q) = %q, want %q", in, got, want)
		}
	}
}

// cloudstone is the web20 shape: a database, then PHP-FPM and nginx
// sharing the web container. db, when given, changes the database role.
func cloudstone(instances, vms int, layout string, db ...func(*Role)) Topology {
	t := Topology{Instances: instances, VMs: vms, Layout: layout, Roles: []Role{
		{Name: "db", Ports: []string{"sql"}, OwnGuest: true, Spec: spec},
		{Name: "fpm", Group: "web", After: []string{"db"}, Spec: spec},
		{Name: "nginx", Group: "web", After: []string{"fpm"}, Entry: true, Spec: spec},
	}}
	for _, f := range db {
		f(&t.Roles[0])
	}
	return t
}

// dbVCPUs sizes the database's guest.
func dbVCPUs(n int) func(*Role) { return func(r *Role) { r.GuestVCPUs = n } }

// guestsOf writes each guest's vCPUs (when the plan sizes guests) and
// servers: "g0/2: i0-fpm-0 i0-nginx-0 | g1/1: i0-db-0".
func guestsOf(p *Plan) string {
	var out []string
	for i, ss := range p.Guests() {
		g := "g" + strconv.Itoa(i)
		if p.GuestVCPUs != nil {
			g += "/" + strconv.Itoa(p.GuestVCPUs[i])
		}
		var n []string
		for _, s := range ss {
			n = append(n, s.ID.Name())
		}
		out = append(out, g+": "+strings.Join(n, " "))
	}
	return strings.Join(out, " | ")
}

// TestPlanOwnGuest: a role in a guest of its own within its instance (the
// CloudStone seed's web and database VMs), which may size that guest (the
// seed's 6-vCPU web VM and 2-vCPU database VM); the overcommit counts each
// guest's own vCPUs.
func TestPlanOwnGuest(t *testing.T) {
	vm := Machine{CPUs: []int{0, 1, 2, 3}, VCPUs: 2}
	vmDocker := Machine{CPUs: vm.CPUs, VCPUs: 2, GuestContainers: true}
	eight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	checkPlans(t, []planCase{
		{"one instance, two guests", cloudstone(1, 2, ""), vm, "g0/2: i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0", ""},
		{"two instances, a web guest and a database guest", cloudstone(2, 2, ""), vm,
			"g0/2: i0-fpm-0 i1-fpm-0 i0-nginx-0 i1-nginx-0 | g1/2: i0-db-0 i1-db-0", ""},
		{"two instances, a guest pair each", cloudstone(2, 4, ""), vm,
			"g0/2: i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0 | g2/2: i1-fpm-0 i1-nginx-0 | g3/2: i1-db-0", ""},
		{"an odd number of guests still parts each instance", cloudstone(2, 3, ""), vm,
			"g0/2: i1-db-0 i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0 | g2/2: i1-fpm-0 i1-nginx-0", ""},
		{"vm-docker, a container per server", cloudstone(1, 2, ContainerPerServer), vmDocker,
			"g0/2: i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0", ""},
		{"one guest is too few on a vm", cloudstone(1, 1, ""), vm, "", "each instance needs 2 guests, but vms is 1"},
		{"more guests than slots", cloudstone(1, 3, ""), vm, "", "vms 3 exceeds the 2 guest(s)"},
		{"vm-docker, a container per instance", cloudstone(1, 2, ContainerPerInstance), vmDocker,
			"", "container i0 would hold i0-db-0 in guest 1 and i0-fpm-0 in guest 0"},
		{"plain vm ignores the layout", cloudstone(1, 2, ContainerPerInstance), vm, "g0/2: i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0", ""},
		{"not a VM: one guest slot is enough", cloudstone(1, 1, ""), Machine{CPUs: vm.CPUs}, "g0: i0-db-0 i0-fpm-0 i0-nginx-0", ""},
		{"not a VM: no sizes", cloudstone(1, 1, "", dbVCPUs(2)), Machine{CPUs: eight}, "g0: i0-db-0 i0-fpm-0 i0-nginx-0", ""},
		{"the extra guests count towards the overcommit", cloudstone(2, 4, ""), Machine{CPUs: []int{0, 1}, VCPUs: 2}, "", "4 guests x 2 vCPUs on 2 CPUs"},
		{"the seed's 6 + 2", cloudstone(1, 2, "", dbVCPUs(2)), Machine{CPUs: eight, VCPUs: 6}, "g0/6: i0-fpm-0 i0-nginx-0 | g1/2: i0-db-0", ""},
		{"the platform's count when the role sets none", cloudstone(1, 2, ""), Machine{CPUs: eight, VCPUs: 3}, "g0/3: i0-fpm-0 i0-nginx-0 | g1/3: i0-db-0", ""},
		{"a guest holding two slots gets the larger", cloudstone(2, 3, "", dbVCPUs(1)), Machine{CPUs: eight, VCPUs: 2},
			"g0/2: i1-db-0 i0-fpm-0 i0-nginx-0 | g1/1: i0-db-0 | g2/2: i1-fpm-0 i1-nginx-0", ""},
		{"the overcommit counts each guest", cloudstone(1, 2, "", dbVCPUs(2)), Machine{CPUs: []int{0, 1}, VCPUs: 6}, "", "2 guests of 6 + 2 vCPUs on 2 CPUs is an overcommit of 4"},
		{"a guest of its own excludes spreading over guests", cloudstone(1, 1, "", func(r *Role) { r.GuestPerServer = true }), vm, "", "a guest of its own excludes"},
		{"guest vcpus without a guest of its own", cloudstone(1, 1, "", func(r *Role) { r.OwnGuest, r.GuestVCPUs = false, 2 }), vm, "", "for a role in a guest of its own"},
	}, guestsOf)
}

func TestGroupCPUs(t *testing.T) {
	tests := []struct {
		sets []string
		want string
	}{
		{nil, ""},
		{[]string{"0", "1"}, "0-1"},
		{[]string{"1", "1"}, "1"},
		{[]string{"0", ""}, ""}, // a member may use any CPU: so may the group
		{[]string{"2-3", "0"}, "0,2-3"},
	}
	for _, tt := range tests {
		if got := GroupCPUs(tt.sets); got != tt.want {
			t.Errorf("GroupCPUs(%q) = %q, want %q", tt.sets, got, tt.want)
		}
	}
}
