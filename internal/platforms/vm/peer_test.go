package vm

import (
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/topology"
)

// TestPeerAddrAcrossGuests: a server reaches a peer in another guest at that
// guest's address, on vm (a process there) and on vm-docker (the port its
// container publishes there); within one guest's engine, at the peer's
// container address.
func TestPeerAddrAcrossGuests(t *testing.T) {
	db := topology.Server{ID: topology.ServerID{Role: "db"}, Group: "i0-db", Guest: 1, Ports: []string{"sql"}}
	fpm := topology.Server{ID: topology.ServerID{Role: "fpm"}, Group: "i0-web", Guest: 0, Ports: []string{"fcgi"}}
	dbNear := db
	dbNear.Guest = 0
	tests := []struct {
		name     string
		kind     string
		from, to topology.Server
		want     string
	}{
		{"vm, another guest", platform.VM, fpm, db, "10.0.0.3:4000"},
		{"vm-docker, another guest's published port", platform.VMDocker, fpm, db, "10.0.0.3:4000"},
		{"vm-docker-host, another guest", KindDockerHost, fpm, db, "10.0.0.3:4000"},
		{"vm-docker, the same guest's bridge", platform.VMDocker, fpm, dbNear, "172.17.0.2:4000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := &topology.Plan{Servers: []topology.Server{tt.to, tt.from}, VMs: 2}
			s := &vmSite{p: &Platform{kind: tt.kind}, plan: plan,
				ports:  map[topology.ServerID]map[string]int{db.ID: {"sql": 4000}, fpm.ID: {"fcgi": 4001}},
				guests: []*vmGuest{{g: &guest{ip: "10.0.0.2"}, index: 0}, {g: &guest{ip: "10.0.0.3"}, index: 1}},
				groups: map[string]*vmGroup{"i0-db": {name: "i0-db", ip: "172.17.0.2"}}}
			got, err := s.PeerAddr(tt.from, tt.to, "sql")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("PeerAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestParseForwardRules: cleanup finds a run's FORWARD rule by its comment
// and deletes it with the same arguments.
func TestParseForwardRules(t *testing.T) {
	run := runid.New()
	other := runid.New()
	out := "-P FORWARD DROP\n-A FORWARD -j DOCKER-USER\n" +
		"-A FORWARD -i nnb-a-0 -o nnb-a-0 -m comment --comment \"" + AliasPrefix + string(run) + "\" -j ACCEPT\n" +
		"-A FORWARD -i nnb-b-0 -o nnb-b-0 -m comment --comment " + AliasPrefix + string(other) + " -j ACCEPT\n"
	got := parseForwardRules(out, run)
	want := "-w -D FORWARD -i nnb-a-0 -o nnb-a-0 -m comment --comment " + AliasPrefix + string(run) + " -j ACCEPT"
	if len(got) != 1 || len(got[run]) != 1 || strings.Join(got[run][0], " ") != want {
		t.Fatalf("rules of %s: %q, want [%s]", run, got, want)
	}
	if all := parseForwardRules(out, ""); len(all) != 2 {
		t.Errorf("rules of every run: %q", all)
	}
	if strings.Join(forwardRule("nnb-a-0", run), " ") != strings.TrimPrefix(want, "-w -D ") {
		t.Errorf("the rule made and the rule found differ: %v", forwardRule("nnb-a-0", run))
	}
}
