package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/redis"
)

// TestVMOptionsFromStudy: the documented vm options vcpus and vm_memory go
// from a study file through the decoder to the guest the platform boots.
func TestVMOptionsFromStudy(t *testing.T) {
	reg := workload.NewRegistry(redis.Workload{})
	src := `name: sizes
platforms:
  - native
  - {name: vm-big, base: vm, options: {vcpus: 3, vm_memory: 3g}}
  - vm
workloads:
  - workload: redis
`
	st, err := study.Parse([]byte(src), "sizes.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	env := platform.Env{Run: runid.New()}
	for _, tt := range []struct {
		name   string
		vcpus  int
		memMiB int64
	}{
		{"vm-big", 3, 3 << 10},
		{"vm", vm.DefaultVCPUs, 2 << 10},
	} {
		sp, ok := st.Platform(tt.name)
		if !ok {
			t.Fatalf("no platform %s", tt.name)
		}
		p, err := Build(context.Background(), sp, env, state.Dir{Root: t.TempDir()}, &Docker{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := p.(*vm.Platform)
		if !ok {
			t.Fatalf("%s built as %T", tt.name, p)
		}
		if c, m := v.Size(); c != tt.vcpus || m != tt.memMiB {
			t.Errorf("%s: guest of %d vCPUs and %d MiB, want %d and %d", tt.name, c, m, tt.vcpus, tt.memMiB)
		}
	}
	// And back: the stored study keeps them.
	y, err := st.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := study.Parse(y, "stored", reg)
	if err != nil {
		t.Fatal(err)
	}
	if sp, _ := again.Platform("vm-big"); sp.Options.VCPUs != 3 || sp.Options.VMMemory != "3g" {
		t.Errorf("stored study lost the options: %+v", sp.Options)
	}
}

func TestCheckDockerHost(t *testing.T) {
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"", true},
		{"unix:///var/run/docker.sock", true},
		{"tcp://127.0.0.1:2375", true},
		{"tcp://localhost:2375", true},
		{"tcp://[::1]:2375", true},
		{"tcp://10.0.0.5:2376", false},
		{"tcp://docker.example.com:2376", false},
		{"ssh://user@build-box", false},
	} {
		err := CheckDockerHost(tt.host)
		if (err == nil) != tt.ok {
			t.Errorf("CheckDockerHost(%q) = %v, want ok %v", tt.host, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "DOCKER_HOST="+tt.host)) {
			t.Errorf("CheckDockerHost(%q) = %v: want an unavailable-platform error naming the setting", tt.host, err)
		}
	}
	t.Setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
	if _, err := (&Docker{}).Get(context.Background()); err == nil || !strings.Contains(err.Error(), "another machine") {
		t.Errorf("Engine.Get with a remote DOCKER_HOST: %v", err)
	}
}

// TestDockerGetAtOnce: guests preparing on several sut hosts ask for the
// engine at once; every caller gets the one outcome (here: no daemon on
// the socket DOCKER_HOST names), never a nil engine without an error (a
// caller that came while the first was connecting did).
func TestDockerGetAtOnce(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/docker.sock")
	var e Docker
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eng, err := e.Get(context.Background())
			if eng == nil && err == nil {
				err = errors.New("nil engine, nil error")
			} else if err != nil && !errors.Is(err, platform.ErrUnavailable) {
				err = fmt.Errorf("not the refusal: %w", err)
			} else {
				err = nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
}
