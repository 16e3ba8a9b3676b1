package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/client"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// GuestKinds returns the guest platforms an opt-in guest test runs, from
// the environment variable env: vm when it is 1, vm and vm-docker when 2.
// Unset, the test is skipped: booting QEMU guests takes minutes under
// emulation.
func GuestKinds(t *testing.T, env string) []string {
	t.Helper()
	switch os.Getenv(env) {
	case "":
		t.Skipf("boots QEMU guests for minutes: set %s=1 (vm) or 2 (vm and vm-docker)", env)
	case "1":
		return []string{platform.VM}
	case "2":
		return []string{platform.VM, platform.VMDocker}
	}
	t.Fatalf("%s=%q: want 1 (vm) or 2 (vm and vm-docker)", env, os.Getenv(env))
	return nil
}

// Guest builds the guest platform kind (vm or vm-docker), named name, for
// run on the current workload image, with its logs under root; it fails t
// when the platform cannot run here and closes it when t ends.
func Guest(ctx context.Context, t *testing.T, run runid.ID, root, kind, name string) platform.Platform {
	t.Helper()
	eng, ref := WorkloadImage(t)
	env := platform.Env{Run: run, LogDir: filepath.Join(root, "logs"), Image: ref}
	p, err := vm.NewKind(kind, name, env, state.Home(), platform.Options{}, func(context.Context) (client.APIClient, error) { return eng.API(), nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Check(ctx); err != nil {
		t.Fatal(fmt.Errorf("%s unavailable: %w", kind, err))
	}
	return p
}
