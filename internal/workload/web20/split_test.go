package web20

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/topology"
)

// planner is a platform that only plans: a vm one when vcpus > 0.
type planner struct {
	platform.Platform
	name  string
	vcpus int
}

func (p planner) Name() string { return p.name }
func (p planner) Machine() topology.Machine {
	return topology.Machine{CPUs: []int{0, 1, 2, 3}, VCPUs: p.vcpus, GuestMemory: 2 << 30}
}
func (planner) Open(context.Context, string, *topology.Plan) (deploy.Site, error) { return nil, nil }

// TestSplit: vm_split puts each instance's database in a guest of its own
// on the vm platforms it names (vms counting guest pairs), and is ignored
// with a note elsewhere.
func TestSplit(t *testing.T) {
	tests := []struct {
		name     string
		params   map[string]string
		p        planner
		want     string // guests of the plan and their vCPUs: "g0/2: ... | g1/1: ..."
		wantNote string
	}{
		{"named vm platform", map[string]string{"vm_split": "vm-split", "instances": "1"}, planner{name: "vm-split", vcpus: 2},
			"g0/2: i0-fpm-0 i0-web-0 | g1/2: i0-db-0", "web guests of 2 vCPUs and database guests of 2"},
		{"db_vcpus sizes the database's guest", map[string]string{"vm_split": "vm-split", "db_vcpus": "1", "instances": "2"}, planner{name: "vm-split", vcpus: 3},
			"g0/3: i0-fpm-0 i1-fpm-0 i0-web-0 i1-web-0 | g1/1: i0-db-0 i1-db-0", "web guests of 3 vCPUs and database guests of 1"},
		{"vms counts guest pairs", map[string]string{"vm_split": "all", "instances": "2", "vms": "2"}, planner{name: "vm", vcpus: 1},
			"g0/1: i0-fpm-0 i0-web-0 | g1/1: i0-db-0 | g2/1: i1-fpm-0 i1-web-0 | g3/1: i1-db-0", "2 guest(s) of each kind"},
		{"another vm platform stays whole", map[string]string{"vm_split": "vm-split", "instances": "1"}, planner{name: "vm", vcpus: 2},
			"g0/2: i0-db-0 i0-fpm-0 i0-web-0", ""},
		{"not a VM: ignored with a note", map[string]string{"vm_split": "all", "instances": "1"}, planner{name: "native"},
			"g0: i0-db-0 i0-fpm-0 i0-web-0", "native is not a VM platform"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := newInstance(t, tt.params, true)
			if err != nil {
				t.Fatal(err)
			}
			topo := in.topology([]instanceData{{DB: "/d0", Site: "/s0", Store: "/f"}, {DB: "/d1", Site: "/s1", Store: "/f"}})
			note := in.split(tt.p, &topo)
			if (tt.wantNote == "") != (note == "") || !strings.Contains(note, tt.wantNote) {
				t.Errorf("note %q, want one containing %q", note, tt.wantNote)
			}
			plan, err := topo.Plan(tt.p.Machine())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, ss := range plan.Guests() {
				g := "g" + strconv.Itoa(i)
				if plan.GuestVCPUs != nil {
					g += "/" + strconv.Itoa(plan.GuestVCPUs[i])
				}
				var n []string
				for _, s := range ss {
					n = append(n, s.ID.Name())
				}
				got = append(got, g+": "+strings.Join(n, " "))
			}
			if g := strings.Join(got, " | "); g != tt.want {
				t.Errorf("guests\n got %s\nwant %s", g, tt.want)
			}
		})
	}
}

func TestSplitRefuses(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"db_vcpus": "2"}, "set vm_split too"},
		{map[string]string{"vm_split": "all,vm"}, "all or platform names"},
	}
	for _, tt := range tests {
		if _, err := newInstance(t, tt.params, true); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.params, err, tt.want)
		}
	}
}
