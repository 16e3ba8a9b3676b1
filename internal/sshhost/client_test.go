package sshhost

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/hostfile"
)

// TestClientSources: a server's access rules get every driver host's
// address, not the first's alone (Subnet), or a second driver host's
// connections would be refused (pg_hba).
func TestClientSources(t *testing.T) {
	c := NewClientHost([]*Conn{
		{Host: hostfile.Host{Name: "d1", Address: "10.0.0.3"}},
		{Host: hostfile.Host{Name: "d2", Address: "10.0.0.4"}},
	}, "10.0.0.2")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.3/32"), netip.MustParsePrefix("10.0.0.4/32")}
	if got := host.Sources(c); !reflect.DeepEqual(got, want) {
		t.Errorf("host.Sources = %v, want %v", got, want)
	}
	if got := c.Subnet(); got != want[0] {
		t.Errorf("Subnet = %v, want the first driver's %v", got, want[0])
	}
}
