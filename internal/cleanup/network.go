package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/nearnative/nearnative/internal/iptables"
	"github.com/nearnative/nearnative/internal/platforms/netns"
	"github.com/nearnative/nearnative/internal/runid"
)

// NetworkSweepers returns the sweepers of the host network objects the
// inter-container networking platforms make, in removal order: namespaces
// (their links go with them), OVS bridges and ports, links tagged with a
// run's alias, iptables rules tagged with a run's comment, and the routes
// a run recorded on this machine as a driver host (Routes).
func NetworkSweepers() []Sweeper {
	return []Sweeper{Namespaces{}, OVS{}, Links{}, IPTables{}, Routes{}}
}

// command runs argv; a missing tool is reported as ok=false without error,
// so that machines without OVS or iptables have nothing to sweep.
func command(ctx context.Context, argv ...string) (out string, ok bool, err error) {
	if _, lerr := exec.LookPath(argv[0]); lerr != nil {
		return "", false, nil
	}
	b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(b), true, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(b)))
	}
	return string(b), true, nil
}

// goneMsg reports whether a command's error says the object is already gone.
func goneMsg(err error) bool {
	if err == nil {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Cannot find device") || strings.Contains(s, "No such file") ||
		strings.Contains(s, "does not exist") || strings.Contains(s, "Bad rule")
}

// runOfAlias returns the run named by a nearnative alias or comment value.
func runOfAlias(s string) (runid.ID, bool) {
	rest, ok := strings.CutPrefix(strings.Trim(s, `"`), netns.Alias)
	if !ok {
		return "", false
	}
	id, err := runid.Parse(rest)
	return id, err == nil
}

// Namespaces sweeps network namespaces nn-<short>-..., found by the alias on
// their loopback link.
type Namespaces struct{}

// Kind implements Sweeper.
func (Namespaces) Kind() string { return "network namespaces" }

func (Namespaces) list(ctx context.Context) (map[string]runid.ID, error) {
	out, ok, err := command(ctx, "ip", "-j", "netns", "list")
	if !ok || err != nil {
		return nil, err
	}
	var nss []struct {
		Name string `json:"name"`
	}
	if strings.TrimSpace(out) != "" {
		if err := json.Unmarshal([]byte(out), &nss); err != nil {
			return nil, fmt.Errorf("ip -j netns list: %w", err)
		}
	}
	found := map[string]runid.ID{}
	for _, ns := range nss {
		if !strings.HasPrefix(ns.Name, netns.NamespacePrefix) {
			continue
		}
		lo, _, err := command(ctx, "ip", "-n", ns.Name, "-j", "link", "show", "dev", "lo")
		if err != nil {
			continue
		}
		var links []struct {
			Alias string `json:"ifalias"`
		}
		if json.Unmarshal([]byte(lo), &links) == nil && len(links) == 1 {
			if id, ok := runOfAlias(links[0].Alias); ok {
				found[ns.Name] = id
			}
		}
	}
	return found, nil
}

// Runs implements Sweeper.
func (n Namespaces) Runs(ctx context.Context) ([]runid.ID, error) {
	found, err := n.list(ctx)
	return values(found), err
}

// Remove implements Sweeper.
func (n Namespaces) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	found, err := n.list(ctx)
	var removed []string
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for name, id := range found {
		if id != run {
			continue
		}
		if _, _, err := command(ctx, "ip", "netns", "del", name); err != nil && !goneMsg(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, fmt.Sprintf("network namespace %s (run %s)", name, run))
	}
	return removed, errors.Join(errs...)
}

// Links sweeps host links (bridges, veth ends, parents) whose alias names a
// run.
type Links struct{}

// Kind implements Sweeper.
func (Links) Kind() string { return "network links" }

func (Links) list(ctx context.Context) (map[string]runid.ID, error) {
	out, ok, err := command(ctx, "ip", "-j", "link", "show")
	if !ok || err != nil {
		return nil, err
	}
	var links []struct {
		Name  string `json:"ifname"`
		Alias string `json:"ifalias"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return nil, fmt.Errorf("ip -j link show: %w", err)
	}
	found := map[string]runid.ID{}
	for _, l := range links {
		if id, ok := runOfAlias(l.Alias); ok {
			found[l.Name] = id
		}
	}
	return found, nil
}

// Runs implements Sweeper.
func (l Links) Runs(ctx context.Context) ([]runid.ID, error) {
	found, err := l.list(ctx)
	return values(found), err
}

// Remove implements Sweeper.
func (l Links) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	found, err := l.list(ctx)
	var removed []string
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for name, id := range found {
		if id != run {
			continue
		}
		// Deleting one end of a veth pair deletes the other: gone is fine.
		if _, _, err := command(ctx, "ip", "link", "del", "dev", name); err != nil && !goneMsg(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, fmt.Sprintf("link %s (run %s)", name, run))
	}
	return removed, errors.Join(errs...)
}

// OVS sweeps Open vSwitch bridges and ports whose external_ids name a run,
// and stops the OVS daemons when that run started them.
type OVS struct{}

// Kind implements Sweeper.
func (OVS) Kind() string { return "Open vSwitch bridges and ports" }

// list returns table's rows (bridge or port) by name with their run. With
// no OVS installed or running there is nothing to list.
func (OVS) list(ctx context.Context, table string) (map[string]runid.ID, error) {
	if _, ok, err := command(ctx, "ovs-vsctl", "--timeout=2", "show"); !ok || err != nil {
		return nil, nil
	}
	out, _, err := command(ctx, "ovs-vsctl", "--timeout=5", "--format=csv", "--data=bare", "--no-headings",
		"--columns=name,external_ids", "list", table)
	if err != nil {
		return nil, err
	}
	found := map[string]runid.ID{}
	for _, line := range strings.Split(out, "\n") {
		name, ids, ok := strings.Cut(strings.TrimSpace(line), ",")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(strings.Trim(ids, `"`)) {
			if v, ok := strings.CutPrefix(kv, netns.OVSExternalID+"="); ok {
				if id, err := runid.Parse(v); err == nil {
					found[name] = id
				}
			}
		}
	}
	return found, nil
}

// Runs implements Sweeper.
func (o OVS) Runs(ctx context.Context) ([]runid.ID, error) {
	set := map[runid.ID]bool{}
	for _, table := range []string{"bridge", "port"} {
		found, err := o.list(ctx, table)
		if err != nil {
			return nil, err
		}
		for _, id := range found {
			set[id] = true
		}
	}
	return keys(set), nil
}

// Remove implements Sweeper.
func (o OVS) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	var removed []string
	var errs []error
	for _, table := range []string{"bridge", "port"} {
		found, err := o.list(ctx, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for name, id := range found {
			if id != run {
				continue
			}
			verb := "del-br"
			if table == "port" {
				verb = "del-port"
			}
			if _, _, err := command(ctx, "ovs-vsctl", "--timeout=10", "--if-exists", verb, name); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, fmt.Sprintf("OVS %s %s (run %s)", table, name, run))
		}
	}
	if stopped, err := netns.StopOVSIfStartedBy(ctx, run); err != nil {
		errs = append(errs, err)
	} else if stopped {
		removed = append(removed, fmt.Sprintf("Open vSwitch daemons started by run %s", run))
	}
	return removed, errors.Join(errs...)
}

// IPTables sweeps iptables rules whose comment names a run.
type IPTables struct{}

// Kind implements Sweeper.
func (IPTables) Kind() string { return "iptables rules" }

// rule is one tagged rule as iptables-save prints it.
type rule struct {
	table string
	args  []string // after -A: chain and match, as iptables -D takes them
	run   runid.ID
}

func (IPTables) list(ctx context.Context) ([]rule, error) {
	out, ok, err := command(ctx, "iptables-save")
	if !ok || err != nil {
		return nil, err
	}
	return parseSave(out), nil
}

// parseSave finds the rules tagged with a run in iptables-save output.
func parseSave(out string) []rule {
	var rules []rule
	table := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if t, ok := strings.CutPrefix(line, "*"); ok {
			table = t
			continue
		}
		rest, ok := strings.CutPrefix(line, "-A ")
		if !ok {
			continue
		}
		args, err := iptables.Split(rest)
		if err != nil {
			continue // not a rule iptables-save prints
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] != "--comment" {
				continue
			}
			if id, ok := runOfAlias(args[i+1]); ok {
				rules = append(rules, rule{table: table, args: args, run: id})
			}
		}
	}
	return rules
}

// Runs implements Sweeper.
func (t IPTables) Runs(ctx context.Context) ([]runid.ID, error) {
	rules, err := t.list(ctx)
	set := map[runid.ID]bool{}
	for _, r := range rules {
		set[r.run] = true
	}
	return keys(set), err
}

// Remove implements Sweeper.
func (t IPTables) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	rules, err := t.list(ctx)
	var removed []string
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range rules {
		if r.run != run {
			continue
		}
		argv := append([]string{"iptables", "-w", "-t", r.table, "-D"}, r.args...)
		if _, _, err := command(ctx, argv...); err != nil && !goneMsg(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, fmt.Sprintf("iptables rule -t %s -A %s (run %s)", r.table, strings.Join(r.args, " "), run))
	}
	return removed, errors.Join(errs...)
}

// values returns the distinct runs of a name -> run map.
func values(m map[string]runid.ID) []runid.ID {
	set := map[runid.ID]bool{}
	for _, id := range m {
		set[id] = true
	}
	return keys(set)
}
