package vm

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/cleanup"
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

// TestForwardRuleSwept: the rule letting a run's guests reach each other
// goes with its bridge, and when a crashed run left it, nearnative
// cleanup's iptables sweep (cleanup.IPTables) finds it by its comment.
func TestForwardRuleSwept(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a bridge and an iptables rule; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for the bridge and iptables")
	}
	if v, err := os.ReadFile(bridgeNetfilter); err != nil || strings.TrimSpace(string(v)) != "1" {
		t.Skipf("%s is not on here: guests need no rule", bridgeNetfilter)
	}
	ctx := context.Background()
	run := runid.New()
	listed := func() bool {
		t.Helper()
		out, err := exec.Command("iptables", "-w", "-S", "FORWARD").CombinedOutput()
		if err != nil {
			t.Fatalf("iptables -S FORWARD: %v: %s", err, out)
		}
		return strings.Contains(string(out), AliasPrefix+string(run))
	}
	b, err := newBridge(run)
	if err != nil {
		t.Fatal(err)
	}
	if b.forward == nil || !listed() {
		t.Fatalf("bridge %s: no forward rule made (isolated: %q)", b.name, b.isolated)
	}
	if err := b.remove(); err != nil || listed() {
		t.Fatalf("removing the bridge: %v; rule left: %v", err, listed())
	}

	// A crashed run's bridge keeps its rule: the sweep removes it.
	b, err = newBridge(run)
	if err != nil {
		t.Fatal(err)
	}
	defer delLink(b.name)
	removed, err := cleanup.IPTables{}.Remove(ctx, run)
	if err != nil || len(removed) != 1 || listed() {
		t.Errorf("cleanup.IPTables: removed %q, %v; rule left: %v", removed, err, listed())
	}
}
