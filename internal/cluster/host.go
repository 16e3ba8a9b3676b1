package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/iptables"
)

// Sysctls are the kernel settings kubelet and kube-proxy may change; Up
// records them and Down writes back the ones that changed.
var Sysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	"net/ipv4/conf/all/route_localnet", "net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established", "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// HostDirs are directories kubelet and the CNI plugins create whatever their
// settings; Down removes those that did not exist before Up.
var HostDirs = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd/runc/k8s.io"}

// iptablesTables are the tables whose chains are recorded.
var iptablesTables = []string{"filter", "nat", "mangle", "raw"}

// HostState is what the host looked like before the cluster came up.
type HostState struct {
	Sysctls map[string]string `json:"sysctls"`
	// Chains maps "iptables/nat" to the chains that existed.
	Chains map[string][]string `json:"chains"`
	// NFTables are the nftables tables that existed ("ip nat").
	NFTables []string `json:"nftables"`
	Dirs     []string `json:"dirs"`
	// Links are the network links that existed.
	Links []string `json:"links"`
}

// RecordHost captures the host state Down restores.
func RecordHost(ctx context.Context) (HostState, error) {
	h := HostState{Sysctls: map[string]string{}, Chains: map[string][]string{}}
	for _, s := range Sysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			h.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			chains, err := listChains(ctx, tool, t)
			if err != nil {
				continue // a table the kernel lacks
			}
			h.Chains[tool+"/"+t] = chains
		}
	}
	h.NFTables = nftTables(ctx)
	for _, d := range HostDirs {
		if _, err := os.Stat(d); err == nil {
			h.Dirs = append(h.Dirs, d)
		}
	}
	links, err := linkNames(ctx)
	if err != nil {
		return h, err
	}
	h.Links = links
	return h, nil
}

func (c Config) hostStatePath() string { return c.path("host-before.json") }

func (c Config) saveHost(h HostState) error {
	b, _ := json.MarshalIndent(h, "", "  ")
	if err := os.WriteFile(c.hostStatePath(), b, 0o644); err != nil {
		return fmt.Errorf("cluster: recording the host state: %w", err)
	}
	return nil
}

func (c Config) loadHost() (HostState, bool) {
	var h HostState
	b, err := os.ReadFile(c.hostStatePath())
	if err != nil || json.Unmarshal(b, &h) != nil {
		return h, false
	}
	return h, true
}

func run(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func listChains(ctx context.Context, tool, table string) ([]string, error) {
	out, err := run(ctx, tool, "-w", "-t", table, "-S")
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "-N" {
			chains = append(chains, f[1])
		}
	}
	sort.Strings(chains)
	return chains, nil
}

func nftTables(ctx context.Context) []string {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil
	}
	var t []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			t = append(t, rest)
		}
	}
	sort.Strings(t)
	return t
}

func linkNames(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// makeBridge creates the cluster's bridge with the node address and a fixed
// MAC (BridgeMAC: pods' ARP entries for the node stay right), and lets
// frames between pods through the FORWARD chain (Docker sets its policy to
// DROP, and bridged frames pass iptables when br_netfilter is loaded).
func (c Config) makeBridge(ctx context.Context) error {
	_, pod, err := net.ParseCIDR(c.PodCIDR)
	if err != nil {
		return fmt.Errorf("cluster: pod CIDR %q: %w", c.PodCIDR, err)
	}
	ones, _ := pod.Mask.Size()
	steps := [][]string{
		{"ip", "link", "add", c.Bridge, "address", c.BridgeMAC().String(), "type", "bridge"},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", c.NodeIP(), ones), "dev", c.Bridge},
		{"ip", "link", "set", c.Bridge, "up"},
		{"iptables", "-w", "-I", "FORWARD", "-i", c.Bridge, "-m", "comment", "--comment", ClusterLabel, "-j", "ACCEPT"},
		{"iptables", "-w", "-I", "FORWARD", "-o", c.Bridge, "-m", "comment", "--comment", ClusterLabel, "-j", "ACCEPT"},
	}
	for _, s := range steps {
		if _, err := run(ctx, s...); err != nil {
			return fmt.Errorf("cluster: making the bridge: %w", err)
		}
	}
	return nil
}

// restoreHost undoes what the cluster changed on the host, as far as the
// record says; every step runs and the errors are joined.
func (c Config) restoreHost(ctx context.Context, h HostState, haveRecord bool) ([]string, error) {
	var u undo
	c.removeLinks(ctx, &u)
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			d, err := removeRules(ctx, tool, t, func(rule string) bool { return strings.Contains(rule, ClusterLabel) })
			u.did(d, err)
			if before, ok := h.Chains[tool+"/"+t]; ok && haveRecord {
				removeAddedChains(ctx, tool, t, before, &u)
			}
		}
	}
	if haveRecord {
		restoreRecorded(ctx, h, &u)
	}
	return u.done, errors.Join(u.errs...)
}

// undo collects what restoreHost removed and what failed.
type undo struct {
	done []string
	errs []error
}

func (u *undo) did(done []string, err error) {
	u.done, u.errs = append(u.done, done...), appendErr(u.errs, err)
}

// step records one removal: done when err is nil, else the error.
func (u *undo) step(what string, err error) {
	if err != nil {
		u.errs = append(u.errs, err)
		return
	}
	u.done = append(u.done, what)
}

// removeLinks deletes the veths left on the bridge, then the bridge.
func (c Config) removeLinks(ctx context.Context, u *undo) {
	if out, err := run(ctx, "ip", "-o", "link", "show", "master", c.Bridge); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				if _, err := run(ctx, "ip", "link", "del", name); err == nil {
					u.done = append(u.done, "link "+name)
				}
			}
		}
	}
	if _, err := run(ctx, "ip", "link", "show", c.Bridge); err == nil {
		_, err := run(ctx, "ip", "link", "del", c.Bridge)
		u.step("bridge "+c.Bridge, err)
	}
}

// removeAddedChains removes the chains of a table that did not exist
// before the cluster (before), after the rules that jump to them.
func removeAddedChains(ctx context.Context, tool, t string, before []string, u *undo) {
	now, err := listChains(ctx, tool, t)
	if err != nil {
		return
	}
	var added []string
	for _, ch := range now {
		if !slices.Contains(before, ch) {
			added = append(added, ch)
		}
	}
	if len(added) == 0 {
		return
	}
	// Rules in any chain that jump to an added chain go first.
	u.did(removeRules(ctx, tool, t, func(rule string) bool {
		for _, ch := range added {
			if strings.Contains(rule, " -j "+ch) || strings.Contains(rule, " -g "+ch) {
				return true
			}
		}
		return false
	}))
	for _, ch := range added {
		run(ctx, tool, "-w", "-t", t, "-F", ch)
	}
	for _, ch := range added {
		_, err := run(ctx, tool, "-w", "-t", t, "-X", ch)
		u.step(fmt.Sprintf("%s chain %s/%s", tool, t, ch), err)
	}
}

// restoreRecorded removes the nftables tables the nft backend made for the
// removed chains, sets the recorded sysctls back and removes the host
// directories that did not exist before.
func restoreRecorded(ctx context.Context, h HostState, u *undo) {
	for _, t := range nftTables(ctx) {
		if !slices.Contains(h.NFTables, t) {
			_, err := run(ctx, append([]string{"nft", "delete", "table"}, strings.Fields(t)...)...)
			u.step("nftables table "+t, err)
		}
	}
	for s, v := range h.Sysctls {
		path := filepath.Join("/proc/sys", s)
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			err = fmt.Errorf("restoring %s to %s: %w", s, v, err)
			u.step("", err)
			continue
		}
		u.step(fmt.Sprintf("sysctl %s back to %s (was %s)", strings.ReplaceAll(s, "/", "."), v, strings.TrimSpace(string(b))), nil)
	}
	for _, d := range HostDirs {
		if slices.Contains(h.Dirs, d) {
			continue
		}
		if _, err := os.Stat(d); err == nil {
			u.step("directory "+d, os.RemoveAll(d))
		}
	}
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// removeRules deletes the rules of table for which match is true.
func removeRules(ctx context.Context, tool, table string, match func(string) bool) ([]string, error) {
	out, err := run(ctx, tool, "-w", "-t", table, "-S")
	if err != nil {
		return nil, nil // no such table
	}
	var done []string
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		rule := sc.Text()
		if !strings.HasPrefix(rule, "-A ") || !match(rule) {
			continue
		}
		args, err := iptables.Split(rule)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args[0] = "-D"
		if _, err := run(ctx, append([]string{tool, "-w", "-t", table}, args...)...); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, fmt.Sprintf("%s rule %s: %s", tool, table, rule))
		}
	}
	return done, errors.Join(errs...)
}
