package cli

import (
	"testing"

	"github.com/nearnative/nearnative/internal/hostfile"
)

// TestWhereRolesRun: the line saying where each role runs lists the placed
// roles sorted by name, the same line for the same file every time (it is
// stored with the run).
func TestWhereRolesRun(t *testing.T) {
	f, err := hostfile.Parse([]byte(`hosts:
  - {name: sut1, address: 192.0.2.10, user: root, agent: true, roles: [sut]}
  - {name: sut2, address: 192.0.2.11, user: root, agent: true, roles: [sut]}
  - {name: client1, address: 192.0.2.12, user: root, agent: true, roles: [driver]}
  - {name: client2, address: 192.0.2.13, user: root, agent: true, roles: [driver]}
place: {twemproxy: sut2, redis: sut1, haproxy: sut2, lb: sut1}
`), "h.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	want := "servers on sut host sut1 (192.0.2.10); haproxy on sut2 (192.0.2.11); lb on sut1 (192.0.2.10); redis on sut1 (192.0.2.10); twemproxy on sut2 (192.0.2.11); " +
		"load driver on driver hosts client1 (192.0.2.12), client2 (192.0.2.13) (nearnative's own driver spreads its processes over them; an external tool such as redis-benchmark runs on the first)"
	for i := 0; i < 20; i++ {
		if got := whereRolesRun(f); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}
