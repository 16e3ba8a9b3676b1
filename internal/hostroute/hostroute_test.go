package hostroute

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/runid"
)

// fakeIP is a routing table of its own: routes by prefix ("via GW" or
// "dev X"), a source address toward every gateway, and prefixes whose
// deletion fails.
type fakeIP struct {
	routes  map[string]string
	failDel map[string]bool
	calls   []string
}

func (f *fakeIP) run(_ context.Context, args ...string) (string, error) {
	f.calls = append(f.calls, strings.Join(args, " "))
	switch {
	case len(args) == 7 && args[2] == "route" && args[3] == "show": // -4 -o route show to match ADDR
		a := netip.MustParseAddr(args[6])
		var out []string
		for p, how := range f.routes {
			if netip.MustParsePrefix(p).Contains(a) {
				out = append(out, p+" "+how+" ")
			}
		}
		return strings.Join(out, "\n"), nil
	case args[0] == "route" && args[1] == "replace":
		f.routes[args[2]] = "via " + args[4]
		return "", nil
	case args[0] == "route" && args[1] == "del":
		if f.failDel[args[2]] {
			return "", errors.New("ip route del: RTNETLINK answers: Operation not permitted")
		}
		if _, ok := f.routes[args[2]]; !ok {
			return "", errors.New("ip route del: RTNETLINK answers: No such process")
		}
		delete(f.routes, args[2])
		return "", nil
	case args[2] == "route" && args[3] == "get":
		return args[4] + " dev eth0 src 10.0.0.3 uid 0\n    cache\n", nil
	}
	return "", errors.New("unexpected ip " + strings.Join(args, " "))
}

func newTable(t *testing.T, f *fakeIP) Table {
	return Table{Dir: t.TempDir(), NetNS: "42", IP: f.run}
}

func TestAddRemove(t *testing.T) {
	ctx := context.Background()
	run := runid.New()
	dst, gw := netip.MustParsePrefix("172.17.0.0/16"), netip.MustParseAddr("10.0.0.2")
	f := &fakeIP{routes: map[string]string{"10.0.0.0/24": "dev eth0"}, failDel: map[string]bool{}}
	tb := newTable(t, f)
	src, err := tb.Add(ctx, run, dst, gw)
	if err != nil || src.String() != "10.0.0.3" {
		t.Fatalf("Add = %v, %v", src, err)
	}
	if b, _ := os.ReadFile(tb.Record(run)); string(b) != "172.17.0.0/16 via 10.0.0.2\n" {
		t.Fatalf("record %q", b)
	}
	if runs, err := tb.Runs(); err != nil || !reflect.DeepEqual(runs, []runid.ID{run}) {
		t.Fatalf("Runs = %v, %v", runs, err)
	}
	// Taken over when routed via the same gateway already.
	if _, err := tb.Add(ctx, runid.New(), dst, gw); err != nil {
		t.Fatalf("Add over an earlier run's route: %v", err)
	}
	// A deletion that fails keeps the line; one that succeeds removes it
	// and the emptied record.
	f.failDel["172.17.0.0/16"] = true
	if _, err := tb.Remove(ctx, run, dst, gw); err == nil {
		t.Fatal("Remove: no error from a failed deletion")
	}
	if _, err := os.Stat(tb.Record(run)); err != nil {
		t.Fatal("the record of a route still there went")
	}
	f.failDel["172.17.0.0/16"] = false
	if was, err := tb.Remove(ctx, run, dst, gw); err != nil || !was {
		t.Fatalf("Remove = %v, %v", was, err)
	}
	if _, err := os.Stat(tb.Record(run)); err == nil {
		t.Fatal("an emptied record is left")
	}
	if was, err := tb.Remove(ctx, run, dst, gw); err != nil || was {
		t.Fatalf("Remove of a gone route = %v, %v; want no error, not there", was, err)
	}
}

func TestAddRefusesRoutedPrefix(t *testing.T) {
	f := &fakeIP{routes: map[string]string{"172.17.0.0/16": "dev docker0 proto kernel scope link src 172.17.0.1"}}
	tb := newTable(t, f)
	run := runid.New()
	_, err := tb.Add(context.Background(), run, netip.MustParsePrefix("172.17.0.0/16"), netip.MustParseAddr("10.0.0.2"))
	if !errors.Is(err, ErrRouted) || !strings.Contains(err.Error(), "dockerd --bip") {
		t.Fatalf("Add over docker0 = %v, want ErrRouted with the fix", err)
	}
	if f.routes["172.17.0.0/16"] != "dev docker0 proto kernel scope link src 172.17.0.1" {
		t.Errorf("the machine's own route changed: %v", f.routes)
	}
	if _, err := os.Stat(tb.Record(run)); err == nil {
		t.Error("a refused route was recorded")
	}
}

func TestRemoveRun(t *testing.T) {
	ctx := context.Background()
	run, other := runid.New(), runid.New()
	f := &fakeIP{routes: map[string]string{}, failDel: map[string]bool{}}
	tb := newTable(t, f)
	gw := netip.MustParseAddr("10.0.0.2")
	for _, p := range []string{"172.17.0.0/16", "172.18.0.0/16"} {
		if _, err := tb.Add(ctx, run, netip.MustParsePrefix(p), gw); err != nil {
			t.Fatal(err)
		}
	}
	// Another namespace's record (a test bed's other host) is not this one's.
	os.WriteFile(Table{Dir: tb.Dir, NetNS: "43"}.Record(other), []byte("172.17.0.0/16 via 10.0.0.2\n"), 0o600)
	delete(f.routes, "172.18.0.0/16") // gone already: not reported
	removed, err := tb.RemoveRun(ctx, run)
	if err != nil || !reflect.DeepEqual(removed, []string{"route 172.17.0.0/16 via 10.0.0.2"}) {
		t.Fatalf("RemoveRun = %v, %v", removed, err)
	}
	if runs, _ := tb.Runs(); len(runs) != 0 {
		t.Errorf("runs left %v", runs)
	}
	if _, err := os.Stat(Table{Dir: tb.Dir, NetNS: "43"}.Record(other)); err != nil {
		t.Error("another namespace's record was removed")
	}
}
