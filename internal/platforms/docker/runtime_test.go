package docker

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
)

func TestParseRunscArgs(t *testing.T) {
	for _, c := range []struct {
		args           []string
		platform, netw string
	}{
		{nil, "ptrace", "sandbox"},
		{[]string{"--platform=kvm"}, "kvm", "sandbox"},
		{[]string{"--platform", "ptrace", "--network", "host"}, "ptrace", "host"},
		{[]string{"-network=none", "--debug"}, "ptrace", "none"},
	} {
		g := ParseRunscArgs(c.args)
		if g.Platform != c.platform || g.Network != c.netw {
			t.Errorf("ParseRunscArgs(%q) = %s/%s, want %s/%s", c.args, g.Platform, g.Network, c.platform, c.netw)
		}
	}
	note := Gvisor{Version: "runsc version 0.0~20221219.0", Platform: "ptrace", Network: "host"}.Note()
	for _, want := range []string{"gVisor (runsc version 0.0~20221219.0)", "platform ptrace", "network host (hostinet"} {
		if !strings.Contains(note, want) {
			t.Errorf("Note() = %q, want %q in it", note, want)
		}
	}
}

func TestNewKinds(t *testing.T) {
	for kind, v := range variants {
		if platform.Family(kind) == "" {
			t.Errorf("kind %s has no family", kind)
		}
		if (v.runtime == RuntimeRunsc) != (platform.Family(kind) == platform.FamilyGVisor) {
			t.Errorf("kind %s: runtime %q but family %s", kind, v.runtime, platform.Family(kind))
		}
	}
	if _, err := New("docker-kata-bridge", "x", platform.Env{Image: "i"}, &Daemon{}, platform.Options{}); err == nil || !strings.Contains(err.Error(), platform.DockerCrunHost) {
		t.Errorf("an unknown kind: %v, want an error listing the kinds", err)
	}
}

// TestRuntimeKinds runs a server under each OCI runtime other than runc:
// the container is made with the runtime, reached from the client host,
// its CPU read from its cgroup (the sandbox's processes, for gVisor), and
// removed by Stop. On a machine where a runtime cannot run (Check refuses
// with the fix) its case is skipped with that reason.
func TestRuntimeKinds(t *testing.T) {
	for _, kind := range []string{platform.DockerRunscNAT, platform.DockerRunscProxy, platform.DockerRunscBridge, platform.DockerRunscHost, platform.DockerCrunBridge, platform.DockerCrunHost} {
		t.Run(kind, func(t *testing.T) {
			p, env := newPlatform(t, kind, kind, platform.Options{})
			ctx := context.Background()
			if err := p.Check(ctx); err != nil {
				if errors.Is(err, platform.ErrUnavailable) {
					t.Skip(err)
				}
				t.Fatalf("Check: %v", err)
			}
			s := start(t, p, "t1", redisSpec("redis"))
			defer s.Stop(ctx)
			pingFrom(t, env.ClientHost(), s.Addr("redis"))
			insp, err := testEng.API().ContainerInspect(ctx, s.(*server).id)
			if err != nil {
				t.Fatal(err)
			}
			if insp.HostConfig.Runtime != p.runtime {
				t.Errorf("container runtime %q, want %q", insp.HostConfig.Runtime, p.runtime)
			}
			if d := s.Describe(); !strings.Contains(d, "runtime "+p.runtime) {
				t.Errorf("Describe() = %q, want the runtime in it", d)
			}
			before, err := s.(platform.CPUReporter).CPUTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				if _, err := redisCommand(s.Addr("redis"), "PING"); err != nil && i == 0 {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond)
			after, err := s.(platform.CPUReporter).CPUTime(ctx)
			if err != nil || after <= before {
				t.Errorf("CPU time %v then %v (%v): want it to grow with the load", before, after, err)
			}
			if sb, ok := p.Sandbox(); ok != (p.runtime == RuntimeRunsc) || (ok && (sb.Name != "gVisor" || sb.Network == "")) {
				t.Errorf("Sandbox() = %+v, %v", sb, ok)
			}
			notes := p.Degradations()
			if p.runtime == RuntimeRunsc && (len(notes) != 1 || !strings.Contains(notes[0], "gVisor") || !strings.Contains(notes[0], "platform ")) {
				t.Errorf("Degradations() = %q, want gVisor's platform and network", notes)
			}
			if p.runtime != RuntimeRunsc && len(notes) > 0 {
				t.Errorf("Degradations() = %q, want none", notes)
			}
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRuntimeUnregistered(t *testing.T) {
	p, _ := newPlatform(t, platform.DockerCrunBridge, "docker-crun-bridge", platform.Options{})
	p.runtime = "nearnative-no-such-runtime"
	err := p.Check(context.Background())
	if !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "make setup") || !strings.Contains(err.Error(), "dockerd does not know") {
		t.Fatalf("Check with an unregistered runtime: %v, want unavailable, naming the fix", err)
	}
}

// TestNetstackRefused compares the check with unshare(1)'s view of a fresh
// network namespace.
func TestNetstackRefused(t *testing.T) {
	out, err := exec.Command("unshare", "-n", "sh", "-c", "test -e /proc/sys/net/core/rmem_default && echo yes || echo no").Output()
	if err != nil {
		t.Skipf("unshare: %v", err)
	}
	want := strings.TrimSpace(string(out)) == "yes"
	if got := NetstackRefused(); got != want {
		t.Errorf("NetstackRefused() = %v, want %v (unshare -n sees the sysctl: %s)", got, want, out)
	}
}
