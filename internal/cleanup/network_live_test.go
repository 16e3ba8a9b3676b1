package cleanup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/hostroute"
	"github.com/nearnative/nearnative/internal/runid"
)

// TestNetworkSweepers makes a tagged veth pair, namespace and iptables rule,
// and a recorded route, as a crashed run would leave them, and checks that the sweepers find the
// run and remove them all.
func TestNetworkSweepers(t *testing.T) {
	if testing.Short() {
		t.Skip("changes host links and iptables; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	ctx := context.Background()
	id := runid.New()
	tag := "nearnative.run=" + string(id)
	link, peer, ns := "nn"+id.Short()+"tsa", "nn"+id.Short()+"tsb", "nn-"+id.Short()+"-ts0"
	rule := []string{"FORWARD", "-s", "10.213.254.0/24", "-d", "10.213.254.0/24", "-m", "comment", "--comment", tag, "-j", "ACCEPT"}
	sh := func(argv ...string) {
		t.Helper()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", link).Run()
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).Run()
	})
	sh("ip", "link", "add", link, "type", "veth", "peer", "name", peer)
	sh("ip", "link", "set", "dev", link, "alias", tag)
	sh("ip", "link", "set", "dev", peer, "alias", tag)
	sh("ip", "netns", "add", ns)
	sh("ip", "-n", ns, "link", "set", "dev", "lo", "alias", tag)
	sh(append([]string{"iptables", "-w", "-I"}, rule...)...)
	// A route a driver host's run added, with its record.
	sh("ip", "addr", "add", "10.213.252.1/30", "dev", link)
	sh("ip", "link", "set", "dev", link, "up")
	sh("ip", "link", "set", "dev", peer, "up")
	sh("ip", "route", "add", "10.213.253.0/24", "via", "10.213.252.2")
	t.Cleanup(func() { exec.Command("ip", "route", "del", "10.213.253.0/24").Run() })
	rec := hostroute.Table{}.Record(id)
	os.MkdirAll(filepath.Dir(rec), 0o700)
	if err := os.WriteFile(rec, []byte("10.213.253.0/24 via 10.213.252.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(rec) })

	for _, s := range NetworkSweepers() {
		runs, err := s.Runs(ctx)
		if err != nil {
			t.Fatalf("%s: %v", s.Kind(), err)
		}
		if _, isOVS := s.(OVS); !isOVS && !slices.Contains(runs, id) {
			t.Errorf("%s: runs %v lack %s", s.Kind(), runs, id)
		}
		removed, err := s.Remove(ctx, id)
		if err != nil {
			t.Errorf("%s: %v", s.Kind(), err)
		}
		t.Logf("%s: %v", s.Kind(), removed)
	}
	if out, _ := exec.Command("ip", "route", "show", "10.213.253.0/24").CombinedOutput(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("the recorded route is left: %s", out)
	}
	if _, err := os.Stat(rec); err == nil {
		t.Error("the route record is left")
	}
	out, _ := exec.Command("ip", "-d", "link", "show").CombinedOutput()
	if strings.Contains(string(out), tag) {
		t.Error("a tagged link is left")
	}
	out, _ = exec.Command("ip", "netns", "list").CombinedOutput()
	if strings.Contains(string(out), ns) {
		t.Error("the namespace is left")
	}
	out, _ = exec.Command("iptables-save").CombinedOutput()
	if strings.Contains(string(out), tag) {
		t.Error("the iptables rule is left")
	}
}
