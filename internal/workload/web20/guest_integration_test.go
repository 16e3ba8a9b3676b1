package web20

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/apps/olio/oliotest"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

// TestTrialInGuests runs a short web20 trial in a QEMU guest: on vm every
// server is a process of the guest, on vm-docker the seed's two containers
// in the guest's engine; the data directory and the site are copied into
// the guest. Under emulation (TCG) it takes minutes, so it runs only when
// asked: NEARNATIVE_WEB20_VM_TEST=1 (vm), =2 (vm and vm-docker).
func TestTrialInGuests(t *testing.T) {
	which := os.Getenv("NEARNATIVE_WEB20_VM_TEST")
	if which == "" {
		t.Skip("boots QEMU guests for minutes: set NEARNATIVE_WEB20_VM_TEST=1 (vm) or 2 (vm and vm-docker)")
	}
	e := oliotest.Setup(t)
	kinds := []string{platform.VM}
	if which == "2" {
		kinds = append(kinds, platform.VMDocker)
	}
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	eng, ref := testenv.WorkloadImage(t)
	env := platform.Env{Run: run, LogDir: filepath.Join(root, "logs"), Image: ref}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			p, err := vm.NewKind(kind, kind, env, state.Home(), platform.Options{}, func(context.Context) (client.APIClient, error) { return eng.API(), nil })
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.Check(ctx); err != nil {
				t.Fatalf("%s unavailable: %v", kind, err)
			}
			// Few users and short cycles: an emulated guest is slow, and the
			// test checks that every operation works there, not its QoS.
			in, err := newInstance(t, map[string]string{"users": "20", "instances": "1", "ramp_up": "5s", "ramp_down": "1s",
				"cycle": "500ms", "php_children": "4", "nginx_workers": "2", "buffer_pool": "128m", "request_timeout": "60s"}, true)
			if err != nil {
				t.Fatal(err)
			}
			in.cacheDir = filepath.Dir(e.Template.Dir)
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "g-" + kind, Round: 1, Platform: p, Host: ps[platform.Native],
				Duration: 30 * time.Second, RawDir: filepath.Join(root, "raw"), Log: testenv.Log{T: t}})
			for _, n := range append(res.Where, res.Notes...) {
				t.Log(n)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Values[MetricOpsPerSec] <= 0 || res.Values[MetricDBCPU] <= 0 || res.Values[MetricWebCPU] <= 0 {
				t.Errorf("%g operations/s, database CPU %g%%, web CPU %g%%", res.Values[MetricOpsPerSec], res.Values[MetricDBCPU], res.Values[MetricWebCPU])
			}
			where := strings.Join(res.Where, "\n")
			if !strings.Contains(where, "guest 0: i0-db-0") {
				t.Errorf("places:\n%s", where)
			}
		})
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("the trials left %v", left)
	}
}
