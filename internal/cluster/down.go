package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stopOrder is the order Down stops the components in: the node first,
// so that kubelet is gone before its pods' containers are removed, the
// control plane last but containerd.
var stopOrder = []string{"kube-proxy", "kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}

// Down stops the cluster and removes everything it made: its pods (through
// the API while it answers), its processes and containers, mounts, the
// bridge and the veths on it, iptables rules, chains and nftables tables
// that were not there before, the kubepods cgroups and the directories it
// created; sysctls that changed are set back. It returns one line per thing
// removed. A cluster that is not up is no error.
func (c Config) Down(ctx context.Context, log io.Writer) ([]string, error) {
	ctx = context.WithoutCancel(ctx)
	var done []string
	var errs []error
	logf := func(format string, args ...any) {
		if log != nil {
			fmt.Fprintf(log, format+"\n", args...)
		}
	}
	host, haveRecord := c.loadHost()
	if c.running("kube-apiserver") > 0 && c.running("kubelet") > 0 {
		logf("cluster: deleting pods through the API")
		d, err := c.deletePods(ctx)
		done = append(done, d...)
		if err != nil {
			logf("cluster: %v (going on: their containers are removed below)", err)
		}
	}
	for _, name := range stopOrder {
		if pid := c.running(name); pid > 0 {
			stopPid(pid, 10*time.Second)
			done = append(done, fmt.Sprintf("process %s (pid %d)", name, pid))
		}
	}
	if c.running("containerd") > 0 {
		d, err := c.removeContainers(ctx)
		done = append(done, d...)
		if err != nil {
			logf("cluster: %v (going on: their processes are killed below)", err)
		}
		pid := c.running("containerd")
		stopPid(pid, 10*time.Second)
		done = append(done, fmt.Sprintf("process containerd (pid %d)", pid))
	}
	// Anything still carrying the mark: shims, components started by a
	// nearnative that lost its pid files.
	for _, pid := range c.markedPids() {
		syscall.Kill(pid, syscall.SIGKILL)
		done = append(done, fmt.Sprintf("process %d (%s)", pid, comm(pid)))
	}
	d, err := killCgroups("kubepods")
	done, errs = append(done, d...), appendErr(errs, err)
	d, err = c.unmountAll()
	done, errs = append(done, d...), appendErr(errs, err)
	d, err = removeCgroups("kubepods")
	done, errs = append(done, d...), appendErr(errs, err)
	d, err = c.restoreHost(ctx, host, haveRecord)
	done, errs = append(done, d...), appendErr(errs, err)
	if _, err := os.Stat(c.RunDir()); err == nil {
		if err := os.RemoveAll(c.RunDir()); err != nil {
			errs = append(errs, fmt.Errorf("cluster: removing %s: %w", c.RunDir(), err))
		} else {
			done = append(done, "directory "+c.RunDir())
		}
	}
	return done, errors.Join(errs...)
}

// deletePods deletes every pod and the namespaces nearnative made, and
// waits for kubelet to tear their sandboxes down (CNI DEL, unmounts).
func (c Config) deletePods(ctx context.Context) ([]string, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var done []string
	zero := int64(0)
	for _, p := range pods.Items {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err == nil {
			done = append(done, "pod "+p.Namespace+"/"+p.Name)
		}
	}
	for {
		left, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return done, err
		}
		if len(left.Items) == 0 {
			return done, nil
		}
		select {
		case <-ctx.Done():
			return done, fmt.Errorf("%d pod(s) still there after 45 s", len(left.Items))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// removeContainers kills and removes every container of the CRI namespace.
func (c Config) removeContainers(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var done []string
	var errs []error
	if out, err := c.ctr(ctx, nil, "tasks", "list", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			c.ctr(ctx, nil, "tasks", "kill", "-s", "SIGKILL", id)
		}
		time.Sleep(300 * time.Millisecond)
		for _, id := range strings.Fields(out) {
			c.ctr(ctx, nil, "tasks", "delete", "-f", id)
		}
	}
	out, err := c.ctr(ctx, nil, "containers", "list", "-q")
	if err != nil {
		return nil, err
	}
	for _, id := range strings.Fields(out) {
		if _, err := c.ctr(ctx, nil, "containers", "delete", id); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "container "+shortID(id))
		}
	}
	return done, errors.Join(errs...)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// mountPoints lists the mount points at or under one of roots, deepest
// first.
func mountPoints(roots ...string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		for _, r := range roots {
			if mp == r || strings.HasPrefix(mp, r+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts what containerd and kubelet mounted: everything under
// the cluster's directory (netns, shm, rootfs, volumes) and under kubelet's
// default directory.
func (c Config) unmountAll() ([]string, error) {
	var done []string
	var errs []error
	for pass := 0; pass < 3; pass++ {
		mps := mountPoints(c.RunDir(), "/var/lib/kubelet", "/run/containerd/runc/k8s.io")
		if len(mps) == 0 {
			break
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil {
				if err2 := syscall.Unmount(mp, syscall.MNT_DETACH); err2 != nil && pass == 2 {
					errs = append(errs, fmt.Errorf("cluster: unmounting %s: %w", mp, err2))
					continue
				}
			}
			done = append(done, "mount "+mp)
		}
	}
	return done, errors.Join(errs...)
}

// cgroupRoots are the hierarchies kubelet makes its cgroups in.
func cgroupRoots() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		out = append(out, "/sys/fs/cgroup") // unified hierarchy mounted at the top
	}
	return out
}

// cgroupDirs lists the directories of the named top cgroup in every
// hierarchy, deepest first.
func cgroupDirs(top string) []string {
	var out []string
	for _, root := range cgroupRoots() {
		base := filepath.Join(root, top)
		filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// killCgroups kills every process left in the top cgroup's tree.
func killCgroups(top string) ([]string, error) {
	var done []string
	seen := map[int]bool{}
	for _, dir := range cgroupDirs(top) {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if pid > 0 && !seen[pid] {
				seen[pid] = true
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					done = append(done, fmt.Sprintf("process %d (%s) in cgroup %s", pid, comm(pid), top))
				}
			}
		}
	}
	if len(seen) > 0 {
		time.Sleep(300 * time.Millisecond)
	}
	return done, nil
}

// removeCgroups removes the top cgroup's tree in every hierarchy.
func removeCgroups(top string) ([]string, error) {
	var errs []error
	n := 0
	for _, dir := range cgroupDirs(top) {
		var err error
		for i := 0; i < 20; i++ {
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("cluster: removing cgroup %s: %w", dir, err))
			continue
		}
		n++
	}
	if n == 0 {
		return nil, errors.Join(errs...)
	}
	return []string{fmt.Sprintf("%d cgroup(s) under %s", n, top)}, errors.Join(errs...)
}

func caPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cluster: no certificate in %s", path)
	}
	return pool, nil
}
