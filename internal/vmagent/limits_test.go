package vmagent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/cgroup"
	"github.com/nearnative/nearnative/internal/runid"
)

// TestStartWithLimits: a process started with cpus and memory runs in a
// cgroup of its own under its run, which goes when it stops; a job with
// limits runs in one too; limits without a run in the environment are
// refused.
func TestStartWithLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	c, _ := testAgent(t)
	ctx := context.Background()
	run := runid.New()
	defer func() {
		for _, l := range cgroup.Leftovers(run) {
			cgroup.RemoveTree(l.Dir)
		}
	}()
	env := map[string]string{runid.EnvVar: string(run)}
	pid, err := c.Start(ctx, Proc{Name: "limited", Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Env: env, CPUs: 0.5, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cg, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if !strings.Contains(string(cg), "nearnative/"+string(run)+"/limited") {
		t.Errorf("the process is not in its group: %s", cg)
	}
	if _, err := c.Stop(ctx, pid, time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for groupsNamed(t, run, "limited") > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := groupsNamed(t, run, "limited"); n > 0 {
		t.Errorf("%d cgroup directories left after Stop", n)
	}

	// A server's user: it joins the group as root, then runs as the user.
	pid, err = c.Start(ctx, Proc{Name: "as-nobody", User: "nobody", Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Env: env, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the wrappers exec
	cg, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if !strings.Contains(string(cg), "/as-nobody") || !strings.Contains(string(st), "Uid:\t65534") {
		t.Errorf("a limited server with a user: cgroup %s, status %s", cg, st)
	}
	c.Stop(ctx, pid, time.Second)

	r, err := c.Run(ctx, Proc{Name: "job", Argv: []string{"cat", "/proc/self/cgroup"}, Dir: t.TempDir(), Env: env, CPUs: 1})
	if err != nil || !strings.Contains(string(r.Stdout), "nearnative/"+string(run)+"/job") {
		t.Errorf("job with limits: %s, %v", r.Stdout, err)
	}
	// The agent's stop removes the run's cgroup tree.
	a := newAgent("x")
	a.noteLimits(Proc{Env: env, CPUs: 1})
	a.killAll()
	if left := cgroup.Leftovers(run); len(left) != 0 {
		t.Errorf("cgroups of the run left after the agent stopped: %v", left)
	}
	if _, err := c.Start(ctx, Proc{Name: "norun", Argv: []string{"sleep", "30"}, Dir: t.TempDir(), CPUs: 1}); err == nil || !strings.Contains(err.Error(), runid.EnvVar) {
		t.Errorf("limits without a run: %v", err)
	}
}

// groupsNamed counts the cgroup directories of processes named name
// (name-N) under run.
func groupsNamed(t *testing.T, run runid.ID, name string) int {
	n := 0
	for _, l := range cgroup.Leftovers(run) {
		m, _ := filepath.Glob(l.Dir + "/" + name + "-*")
		n += len(m)
	}
	return n
}

// TestOwnDir: a process directory someone else could have prepared is
// refused; files are never written through a symlink.
func TestOwnDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	base := t.TempDir()
	os.Chmod(base, os.ModeSticky|0o777) // as /tmp
	mk := func(name string, mode os.FileMode, uid int) string {
		d := filepath.Join(base, name)
		os.Mkdir(d, mode)
		os.Chmod(d, mode)
		os.Chown(d, uid, uid)
		return d
	}
	os.Symlink(base, filepath.Join(base, "link"))
	for _, tc := range []struct {
		dir  string
		want string // "" = accepted
	}{
		{mk("mine", 0o755, 0), ""},
		{mk("theirs", 0o755, 65534), "belongs to uid 65534"},
		{mk("open", 0o777, 0), "writable by other users"},
		{mk("sticky", os.ModeSticky|0o777, 0), ""},
		{filepath.Join(base, "link"), "not a directory"},
	} {
		err := ownDir(tc.dir, -1)
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("ownDir(%s) = %v, want %q", filepath.Base(tc.dir), err, tc.want)
		}
	}
	if err := ownDir(filepath.Join(base, "theirs"), 65534); err != nil {
		t.Errorf("the process's own user's directory: %v", err)
	}
	// Where only root may write, no one else could have made it.
	if err := ownDir(mk("mine/theirs-inside", 0o755, 65534), -1); err != nil {
		t.Errorf("a directory in a root-only one: %v", err)
	}
	target := filepath.Join(base, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	os.Symlink(target, filepath.Join(base, "mine", "token"))
	if err := writeNoFollow(filepath.Join(base, "mine", "token"), []byte("secret"), 0o600); err == nil {
		t.Error("wrote through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target was overwritten: %q", b)
	}
}
