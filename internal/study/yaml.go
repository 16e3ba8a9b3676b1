package study

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nearnative/nearnative/internal/workload"
)

// YAML renders the study as it runs: every setting explicit, after
// overrides, with the seed and each workload's resolved parameters (its
// Params where it has not been resolved). Parse reads it back to the same
// study.
func (s *Study) YAML() ([]byte, error) {
	root := mapping(false)
	add := func(key string, value *yaml.Node) { root.Content = append(root.Content, plain(key), value) }
	add("name", str(s.Name))
	if s.Description != "" {
		add("description", str(s.Description))
	}
	add("baseline", str(s.Baseline))
	add("rounds", plain(strconv.Itoa(s.Rounds)))
	add("warmup", plain(strconv.Itoa(s.Warmup)))
	add("trial", plain(formatDuration(s.Trial)))
	add("order", str(s.Order))
	add("seed", plain(strconv.FormatInt(s.Seed, 10)))
	add("min_pairs", plain(strconv.Itoa(s.MinPairs)))
	add("outside_cpu_max", plain(formatFloat(s.OutsideCPUMax)))
	if s.Client != "" {
		add("client", str(s.Client))
	}
	if s.ClientMTU != 0 {
		add("client_mtu", plain(strconv.Itoa(s.ClientMTU)))
	}
	if s.ClientSubnet != "" {
		add("client_subnet", str(s.ClientSubnet))
	}
	if s.Hosts != "" {
		add("hosts", str(s.Hosts))
	}
	add("until_ci", plain(formatFloat(s.UntilCI)))
	if len(s.UntilCIMetrics) > 0 {
		ms := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, m := range s.UntilCIMetrics {
			ms.Content = append(ms.Content, str(m))
		}
		add("until_ci_metrics", ms)
	}
	add("max_rounds", plain(strconv.Itoa(s.MaxRounds)))
	add("max_time", plain(formatDuration(s.MaxTime)))

	platforms := &yaml.Node{Kind: yaml.SequenceNode}
	for _, p := range s.Platforms {
		platforms.Content = append(platforms.Content, platformNode(p))
	}
	add("platforms", platforms)

	workloads := &yaml.Node{Kind: yaml.SequenceNode}
	for _, w := range s.Workloads {
		workloads.Content = append(workloads.Content, workloadNode(w))
	}
	add("workloads", workloads)

	if q := quickNode(s.Quick); len(q.Content) > 0 {
		add("quick", q)
	}

	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("rendering study %s: %w", s.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rendering study %s: %w", s.Name, err)
	}
	return b.Bytes(), nil
}

// WithQuick returns the study as --quick would run it, to print as a file
// to copy and edit: the quick block applied and left out (the file is the
// quick run), every parameter resolved with its --quick value, and the
// seed left at 0, to be chosen at run time. Nothing about this machine is
// checked: that is Apply's, when the study is run.
func (s *Study) WithQuick(reg *workload.Registry) (*Study, error) {
	c := *s
	c.Platforms = slices.Clone(s.Platforms)
	c.Workloads = slices.Clone(s.Workloads)
	c.applyQuick(true, true)
	c.Quick, c.QuickLeftOut, c.Seed = Quick{}, nil, 0
	if err := c.resolve(reg, false); err != nil {
		return nil, err
	}
	return &c, nil
}

// platformNode renders a built-in as its name, a variant as a flow mapping.
func platformNode(p Platform) *yaml.Node {
	if !p.IsVariant() {
		return str(p.Name)
	}
	n := mapping(true, plain("name"), str(p.Name), plain("base"), str(p.Base))
	o := mapping(true)
	if p.Options.CPUs != 0 {
		o.Content = append(o.Content, plain("cpus"), plain(formatFloat(p.Options.CPUs)))
	}
	if p.Options.CPUSet != "" {
		o.Content = append(o.Content, plain("cpuset"), str(p.Options.CPUSet))
	}
	if p.Options.Memory != "" {
		o.Content = append(o.Content, plain("memory"), str(p.Options.Memory))
	}
	if p.Options.VCPUs != 0 {
		o.Content = append(o.Content, plain("vcpus"), plain(strconv.Itoa(p.Options.VCPUs)))
	}
	if p.Options.VMMemory != "" {
		o.Content = append(o.Content, plain("vm_memory"), str(p.Options.VMMemory))
	}
	if p.Options.Pin != "" {
		o.Content = append(o.Content, plain("pin"), str(p.Options.Pin))
	}
	if p.Options.Place != "" {
		pl := mapping(true)
		for _, pair := range strings.Split(p.Options.Place, ",") {
			role, node, _ := strings.Cut(pair, "=")
			pl.Content = append(pl.Content, str(role), str(node))
		}
		o.Content = append(o.Content, plain("place"), pl)
	}
	if len(o.Content) > 0 {
		n.Content = append(n.Content, plain("options"), o)
	}
	return n
}

// workloadNode renders a workload with its parameters sorted by name.
func workloadNode(w Workload) *yaml.Node {
	n := mapping(false, plain("workload"), str(w.Kind))
	if w.Name != w.Kind {
		n.Content = append(n.Content, plain("name"), str(w.Name))
	}
	params := map[string]string(w.Values)
	if params == nil {
		params = w.Params
	}
	if len(params) > 0 {
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		sort.Strings(names)
		pn := mapping(true)
		for _, k := range names {
			pn.Content = append(pn.Content, plain(k), paramValue(params[k]))
		}
		n.Content = append(n.Content, plain("params"), pn)
	}
	return n
}

func quickNode(q Quick) *yaml.Node {
	n := mapping(true)
	if q.Rounds != 0 {
		n.Content = append(n.Content, plain("rounds"), plain(strconv.Itoa(q.Rounds)))
	}
	if q.Warmup != nil {
		n.Content = append(n.Content, plain("warmup"), plain(strconv.Itoa(*q.Warmup)))
	}
	if q.Trial != 0 {
		n.Content = append(n.Content, plain("trial"), plain(formatDuration(q.Trial)))
	}
	if q.MaxRounds != 0 {
		n.Content = append(n.Content, plain("max_rounds"), plain(strconv.Itoa(q.MaxRounds)))
	}
	if q.MaxTime != 0 {
		n.Content = append(n.Content, plain("max_time"), plain(formatDuration(q.MaxTime)))
	}
	if len(q.Workloads) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, w := range q.Workloads {
			l.Content = append(l.Content, str(w))
		}
		n.Content = append(n.Content, plain("workloads"), l)
	}
	if len(q.Platforms) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, p := range q.Platforms {
			l.Content = append(l.Content, str(p))
		}
		n.Content = append(n.Content, plain("platforms"), l)
	}
	return n
}

func mapping(flow bool, content ...*yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Content: content}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

// plain is a scalar written as is (numbers, durations, keys).
func plain(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// str is a string scalar, quoted when it would otherwise read as something
// else (a number, a boolean, null).
func str(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

// paramValue writes a parameter value plainly where it can: Parse keeps a
// parameter's text whatever YAML type it reads as, so 1000 and "1000" are
// the same. Only text that would not read back as itself is quoted.
func paramValue(v string) *yaml.Node {
	n := plain(v)
	if v == "" || v == "~" || strings.EqualFold(v, "null") {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// formatDuration writes d the way people do: 20s, 4m, 1h, 1h30m, 1.5s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
