package vmagent

import (
	"context"
	"os"
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

// groupsNamed counts the cgroup directories named name under run.
func groupsNamed(t *testing.T, run runid.ID, name string) int {
	n := 0
	for _, l := range cgroup.Leftovers(run) {
		if _, err := os.Stat(l.Dir + "/" + name); err == nil {
			n++
		}
	}
	return n
}
