package cli

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/studies"
)

// TestStudiesShow: `studies show NAME` prints the built-in file as it
// ships; with --quick it prints a file whose plain run is the --quick run
// of the built-in.
func TestStudiesShow(t *testing.T) {
	infos, err := study.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	reg := Registry()
	dir := t.TempDir()
	for _, i := range infos {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), []string{"studies", "show", i.Name}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", i.Name, err)
		}
		want, err := fs.ReadFile(studies.FS, i.Name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stdout.Bytes(), want) {
			t.Errorf("studies show %s is not the built-in file", i.Name)
		}

		stdout.Reset()
		if err := Run(context.Background(), []string{"studies", "show", i.Name, "--quick"}, &stdout, &stderr); err != nil {
			t.Fatalf("%s --quick: %v", i.Name, err)
		}
		file := filepath.Join(dir, i.Name+"-quick.yaml")
		if err := os.WriteFile(file, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		copied, err := study.Load(file, reg)
		if err != nil {
			t.Errorf("%s --quick: the printed study does not load: %v\n%s", i.Name, err, stdout.String())
			continue
		}
		orig, err := study.Load(i.Name, reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := orig.Apply(study.Overrides{Quick: true}, reg); err != nil {
			t.Fatalf("%s --quick: %v", i.Name, err)
		}
		if err := copied.Apply(study.Overrides{}, reg); err != nil {
			t.Errorf("%s: the printed --quick study does not run: %v", i.Name, err)
			continue
		}
		same := copied.Rounds == orig.Rounds && copied.Warmup == orig.Warmup && copied.Trial == orig.Trial &&
			copied.MaxRounds == orig.MaxRounds && copied.MaxTime == orig.MaxTime && copied.UntilCI == orig.UntilCI &&
			slices.Equal(copied.PlatformNames(), orig.PlatformNames()) && len(copied.Workloads) == len(orig.Workloads)
		for k := 0; same && k < len(orig.Workloads); k++ {
			cw, ow := copied.Workloads[k], orig.Workloads[k]
			same = cw.Name == ow.Name && cw.Kind == ow.Kind && fmtValues(cw.Values) == fmtValues(ow.Values)
		}
		if !same {
			t.Errorf("%s: the printed --quick study runs otherwise than --quick:\n%s", i.Name, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"studies", "show", "no-such-study"}, &stdout, &stderr); ExitCode(err) != ExitBadInput || stdout.Len() > 0 {
		t.Errorf("unknown study: exit %d (%v), stdout %q", ExitCode(err), err, stdout.String())
	}
}

func fmtValues(v map[string]string) string {
	var parts []string
	for k, x := range v {
		parts = append(parts, k+"="+x)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// fakeCheck answers for platform kinds as a machine without KVM and
// without a cluster would.
type fakeCheck map[string]string

func (f fakeCheck) Check(_ context.Context, p study.Platform, _ host.Setting) string {
	switch {
	case isVM(p.Base):
		return f["vm"]
	case isK8s(p.Base):
		return f["k8s"]
	}
	return ""
}

// TestStudiesNeeds: what a study needs and why it cannot run here come
// from the workloads' own refusals (fio's disk check), the platforms'
// cpusets and the platform checks.
func TestStudiesNeeds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := write("huge.yaml", `name: huge
description: a fio file no disk holds
platforms: [native, vm, k8s-pod]
workloads:
  - {workload: fio, params: {size: 100t}}
quick: {trial: 2s, platforms: [native]}
`)
	pinned := write("pinned.yaml", `name: pinned
description: pinned to a CPU this machine lacks
platforms: [native, {name: far, base: native, options: {cpuset: "1023"}}]
workloads:
  - {workload: redis}
`)
	small := write("small.yaml", `name: small
description: a small fio file, KVM for the full run only
platforms: [native, vm]
workloads:
  - {workload: fio, params: {size: 64m}}
quick: {platforms: [native]}
`)
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, reg: Registry()}
	check := fakeCheck{"vm": "VM rows would be emulated (TCG), not comparable: /dev/kvm does not boot guests", "k8s": "k8s rows: no Kubernetes cluster"}
	if err := a.listStudies(context.Background(), []string{huge, pinned, small}, check); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	tmp := os.TempDir()
	lines := strings.Split(out, "\n")
	has := func(prefix string, parts ...string) {
		t.Helper()
		for _, l := range lines {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, prefix) {
				continue
			}
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return
			}
		}
		t.Errorf("no line %q with %q:\n%s", prefix, parts, out)
	}
	has("huge ", "refused *", "refused *", "free under "+tmp, "KVM for vm rows (full only)", "a cluster for k8s rows (full only)")
	has("huge: cannot run here: needs ", "free under "+tmp, "left")
	has("huge, full: VM rows would be emulated")
	has("huge, full: k8s rows: no Kubernetes cluster")
	has("pinned ", "refused *", "1024 cores")
	has("pinned: cannot run here: its platforms pin CPUs up to 1023, this machine has")
	has("small ", "about ", "about ", "free under "+tmp, "KVM for vm rows (full only)")
	has("small, full: VM rows would be emulated")
	for _, l := range lines {
		if strings.HasPrefix(l, "small, --quick") || strings.HasPrefix(l, "small: ") {
			t.Errorf("the quick run of small has no vm row, yet: %s", l)
		}
	}
}

// TestPlatformsPlannedClient: `nearnative platforms` checks each platform
// for the client host a run would make (described, not made), so
// docker-nat, whose DNAT path serves no loopback address, is not refused
// for a loopback client no run would give it.
func TestPlatformsPlannedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("checks the platforms against the Docker engine")
	}
	for _, client := range []string{"netns", "host"} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), []string{"platforms", "--client", client}, &stdout, &stderr); err != nil {
			t.Fatalf("platforms --client %s: %v\n%s", client, err, stderr.String())
		}
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(line, "docker-nat ") && strings.Contains(line, "client on loopback") {
				t.Errorf("--client %s: %s", client, line)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"platforms", "--client", "bogus"}, &stdout, &stderr)
	if code := ExitCode(err); code != ExitBadInput {
		t.Errorf("platforms --client bogus: exit %d (%v), want %d", code, err, ExitBadInput)
	}
}
