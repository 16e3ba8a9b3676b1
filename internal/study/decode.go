package study

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/yamlnode"
)

// Keys accepted in each part of a study file, in documentation order.
var (
	studyKeys    = []string{"name", "description", "baseline", "rounds", "warmup", "trial", "order", "seed", "min_pairs", "outside_cpu_max", "client", "client_mtu", "client_subnet", "hosts", "until_ci", "until_ci_metrics", "max_rounds", "max_time", "platforms", "workloads", "quick"}
	platformKeys = []string{"name", "base", "options"}
	optionKeys   = []string{"cpus", "cpuset", "memory", "vcpus", "vm_memory", "pin", "place"}
	workloadKeys = []string{"workload", "name", "params"}
	quickKeys    = []string{"rounds", "warmup", "trial", "max_rounds", "max_time", "workloads", "platforms"}
)

// decoder turns a study file's YAML nodes into a Study, rejecting unknown
// keys and values of the wrong type. It checks nothing else: that is
// Validate's job.
type decoder struct {
	file string
}

// decode reads the one YAML document in data into a Study with defaults for
// whatever the document leaves out.
func decode(data []byte, file string) (*Study, error) {
	d := decoder{file: file}
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, d.errf(1, "the study file is empty")
		}
		return nil, d.syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, d.errf(extra.Line, "a study file holds one YAML document; a second starts here")
	} else if !errors.Is(err, io.EOF) {
		return nil, d.syntaxError(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	root = yamlnode.Deref(root)
	s := New("")
	s.Source = file
	s.lines = lines{"": root.Line}
	if yamlnode.IsNull(root) {
		return nil, d.errf(root.Line, "the study file is empty")
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.errf(root.Line, "want a mapping with keys %s, got %s", strings.Join(studyKeys, ", "), yamlnode.KindName(root))
	}
	err := d.fields(root, "study", studyKeys, func(key string, k, v *yaml.Node) error {
		s.lines[key] = k.Line
		return d.studyField(s, key, k, v)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// studyField sets one top-level field.
func (d *decoder) studyField(s *Study, key string, k, v *yaml.Node) error {
	var err error
	switch key {
	case "name":
		s.Name, err = d.str(key, k, v)
	case "description":
		s.Description, err = d.str(key, k, v)
	case "baseline":
		s.Baseline, err = d.str(key, k, v)
	case "rounds":
		s.Rounds, err = d.integer(key, k, v)
	case "warmup":
		s.Warmup, err = d.integer(key, k, v)
	case "trial":
		s.Trial, err = d.duration(key, k, v)
	case "order":
		s.Order, err = d.str(key, k, v)
	case "seed":
		s.Seed, err = d.int64(key, k, v)
	case "min_pairs":
		s.MinPairs, err = d.integer(key, k, v)
	case "outside_cpu_max":
		s.OutsideCPUMax, err = d.number(key, k, v)
	case "client":
		s.Client, err = d.str(key, k, v)
	case "client_mtu":
		s.ClientMTU, err = d.integer(key, k, v)
	case "client_subnet":
		s.ClientSubnet, err = d.str(key, k, v)
	case "hosts":
		s.Hosts, err = d.str(key, k, v)
	case "until_ci":
		s.UntilCI, err = d.number(key, k, v)
	case "until_ci_metrics":
		s.UntilCIMetrics, err = d.names(key, k, v)
	case "max_rounds":
		s.MaxRounds, err = d.integer(key, k, v)
	case "max_time":
		s.MaxTime, err = d.duration(key, k, v)
	case "platforms":
		s.Platforms, err = d.platforms(k, v)
	case "workloads":
		s.Workloads, err = d.workloads(k, v)
	case "quick":
		err = d.quick(s, k, v)
	}
	return err
}

// platforms decodes the platforms list.
func (d *decoder) platforms(k, v *yaml.Node) ([]Platform, error) {
	items, err := d.list("platforms", k, v)
	if err != nil {
		return nil, err
	}
	var ps []Platform
	for i, item := range items {
		where := fmt.Sprintf("platforms[%d]", i)
		p := Platform{lines: lines{"": item.Line}}
		switch item.Kind {
		case yaml.ScalarNode:
			p.Name, p.Base = item.Value, item.Value
			p.lines["name"] = item.Line
		case yaml.MappingNode:
			p.variant = true
			err = d.fields(item, where, platformKeys, func(key string, k, v *yaml.Node) error {
				p.lines[key] = k.Line
				var err error
				switch key {
				case "name":
					p.Name, err = d.str(where+".name", k, v)
				case "base":
					p.Base, err = d.str(where+".base", k, v)
				case "options":
					err = d.options(&p, where+".options", k, v)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
		default:
			return nil, d.errf(item.Line, "%s: want a platform name or {name, base, options}, got %s", where, yamlnode.KindName(item))
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// options decodes a variant's resource options.
func (d *decoder) options(p *Platform, where string, k, v *yaml.Node) error {
	if yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return d.errf(k.Line, "%s: want a mapping with keys %s, got %s", where, strings.Join(optionKeys, ", "), yamlnode.KindName(v))
	}
	return d.fields(v, where, optionKeys, func(key string, k, v *yaml.Node) error {
		p.lines["options."+key] = k.Line
		var err error
		switch key {
		case "cpus":
			p.Options.CPUs, err = d.number(where+"."+key, k, v)
		case "cpuset":
			p.Options.CPUSet, err = d.str(where+"."+key, k, v)
		case "memory":
			p.Options.Memory, err = d.str(where+"."+key, k, v)
		case "vcpus":
			p.Options.VCPUs, err = d.integer(where+"."+key, k, v)
		case "vm_memory":
			p.Options.VMMemory, err = d.str(where+"."+key, k, v)
		case "pin":
			p.Options.Pin, err = d.str(where+"."+key, k, v)
		case "place":
			p.Options.Place, err = d.place(where+"."+key, k, v)
		}
		return err
	})
}

// place decodes a variant's placement of roles on Kubernetes nodes, a
// mapping of role to node, into Options.Place's canonical form.
func (d *decoder) place(where string, k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.MappingNode {
		return "", d.errf(k.Line, "%s: want a mapping of role to node, e.g. {db: node-a, web: node-b}, got %s", where, yamlnode.KindName(v))
	}
	m := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		rk, rv := v.Content[i], yamlnode.Deref(v.Content[i+1])
		role, err := d.str(where, rk, rk)
		if err != nil {
			return "", err
		}
		node, err := d.str(where+"."+role, rk, rv)
		if err != nil {
			return "", err
		}
		if _, dup := m[role]; dup {
			return "", d.errf(rk.Line, "%s: role %s placed twice", where, role)
		}
		if strings.ContainsAny(role+node, ",=") {
			return "", d.errf(rk.Line, "%s: %s on %q: role and node names have no ',' or '='", where, role, node)
		}
		m[role] = node
	}
	return platform.FormatPlace(m), nil
}

// workloads decodes the workloads list.
func (d *decoder) workloads(k, v *yaml.Node) ([]Workload, error) {
	items, err := d.list("workloads", k, v)
	if err != nil {
		return nil, err
	}
	var ws []Workload
	for i, item := range items {
		where := fmt.Sprintf("workloads[%d]", i)
		if item.Kind != yaml.MappingNode {
			return nil, d.errf(item.Line, "%s: want a mapping with keys %s, got %s", where, strings.Join(workloadKeys, ", "), yamlnode.KindName(item))
		}
		w := Workload{lines: lines{"": item.Line}}
		err := d.fields(item, where, workloadKeys, func(key string, k, v *yaml.Node) error {
			w.lines[key] = k.Line
			var err error
			switch key {
			case "workload":
				w.Kind, err = d.str(where+".workload", k, v)
			case "name":
				w.Name, err = d.str(where+".name", k, v)
			case "params":
				err = d.params(&w, where+".params", k, v)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if w.Name == "" {
			w.Name = w.Kind
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// params decodes a workload's parameters as strings, exactly as written.
func (d *decoder) params(w *Workload, where string, k, v *yaml.Node) error {
	if yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return d.errf(k.Line, "%s: want a mapping of parameter names to values, got %s", where, yamlnode.KindName(v))
	}
	w.Params = map[string]string{}
	return d.fields(v, where, nil, func(key string, k, v *yaml.Node) error {
		w.lines["params."+key] = k.Line
		if v.Kind != yaml.ScalarNode {
			return d.errf(k.Line, "%s.%s: want a single value, got %s", where, key, yamlnode.KindName(v))
		}
		w.Params[key] = v.Value
		return nil
	})
}

// quick decodes the quick block.
func (d *decoder) quick(s *Study, k, v *yaml.Node) error {
	if yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return d.errf(k.Line, "quick: want a mapping with keys %s, got %s", strings.Join(quickKeys, ", "), yamlnode.KindName(v))
	}
	return d.fields(v, "quick", quickKeys, func(key string, k, v *yaml.Node) error {
		s.lines["quick."+key] = k.Line
		where := "quick." + key
		var err error
		switch key {
		case "rounds":
			s.Quick.Rounds, err = d.integer(where, k, v)
		case "warmup":
			var n int
			if n, err = d.integer(where, k, v); err == nil {
				s.Quick.Warmup = &n
			}
		case "trial":
			s.Quick.Trial, err = d.duration(where, k, v)
		case "max_rounds":
			s.Quick.MaxRounds, err = d.integer(where, k, v)
		case "max_time":
			s.Quick.MaxTime, err = d.duration(where, k, v)
		case "workloads":
			s.Quick.Workloads, err = d.names(where, k, v)
		case "platforms":
			s.Quick.Platforms, err = d.names(where, k, v)
		}
		return err
	})
}

// fields calls set for each key of mapping n in order, skipping keys whose
// value is null (left out). known lists the keys allowed; nil allows any.
// where names the mapping in errors.
func (d *decoder) fields(n *yaml.Node, where string, known []string, set func(key string, k, v *yaml.Node) error) error {
	return yamlnode.Fields(n, where, known, true, d.errf, set)
}

// list returns the items of a sequence, aliases resolved.
func (d *decoder) list(where string, k, v *yaml.Node) ([]*yaml.Node, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, d.errf(k.Line, "%s: want a list, got %s", where, yamlnode.KindName(v))
	}
	items := make([]*yaml.Node, len(v.Content))
	for i, item := range v.Content {
		items[i] = yamlnode.Deref(item)
	}
	return items, nil
}

// names decodes a list of names (metrics, workloads, platforms); an item
// that is not a string is reported at its own line and index.
func (d *decoder) names(where string, k, v *yaml.Node) ([]string, error) {
	items, err := d.list(where, k, v)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, item := range items {
		name, err := d.str(fmt.Sprintf("%s[%d]", where, i), item, item)
		if err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

func (d *decoder) str(where string, k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", d.errf(k.Line, "%s: want a string, got %s", where, yamlnode.KindName(v))
	}
	return v.Value, nil
}

func (d *decoder) int64(where string, k, v *yaml.Node) (int64, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, d.errf(k.Line, "%s: want an integer, got %s", where, yamlnode.KindName(v))
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, d.errf(v.Line, "%s: %q is not an integer", where, v.Value)
	}
	return n, nil
}

func (d *decoder) integer(where string, k, v *yaml.Node) (int, error) {
	n, err := d.int64(where, k, v)
	if err == nil && int64(int(n)) != n {
		return 0, d.errf(v.Line, "%s: %d is too large", where, n)
	}
	return int(n), err
}

func (d *decoder) number(where string, k, v *yaml.Node) (float64, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, d.errf(k.Line, "%s: want a number, got %s", where, yamlnode.KindName(v))
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil {
		return 0, d.errf(v.Line, "%s: %q is not a number", where, v.Value)
	}
	return f, nil
}

func (d *decoder) duration(where string, k, v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, d.errf(k.Line, "%s: want a duration, got %s", where, yamlnode.KindName(v))
	}
	t, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, d.errf(v.Line, "%s: %q is not a duration (e.g. 20s, 5m, 1h)", where, v.Value)
	}
	return t, nil
}

func (d *decoder) errf(line int, format string, args ...any) error {
	return &Error{File: d.file, Line: line, Err: fmt.Errorf(format, args...)}
}

// syntaxError turns a yaml.v3 error into a one-line "file:line: " error.
func (d *decoder) syntaxError(err error) error {
	line, msg := yamlnode.Syntax(err)
	return &Error{File: d.file, Line: line, Err: fmt.Errorf("invalid YAML: %s", msg)}
}
