package study

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

var (
	// studyName is what a study's name may look like.
	studyName = regexp.MustCompile(`^[a-z0-9-]+$`)
	// labelName is what platform variant and workload names may look like;
	// they end up in container names, file names and reports.
	labelName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// Validate checks the study's settings: bounds, platforms and their options,
// workloads and their parameters (against reg), and the baseline. It returns
// the problem that comes first in the file, as one "file:line: " line.
func (s *Study) Validate(reg *workload.Registry) error {
	if reg == nil {
		return errors.New("study: validating needs a workload registry")
	}
	v := &validator{s: s}
	v.settings()
	v.quick()
	v.platforms()
	v.workloads(reg)
	v.baseline()
	return v.first()
}

// validator collects a study's problems with their lines.
type validator struct {
	s    *Study
	errs []*Error
}

func (v *validator) add(line int, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.s.Source, Line: line, Err: fmt.Errorf(format, args...)})
}

// first returns the problem on the earliest line; problems without a line
// (settings made in code) come last.
func (v *validator) first() error {
	if len(v.errs) == 0 {
		return nil
	}
	key := func(e *Error) int {
		if e.Line <= 0 {
			return math.MaxInt
		}
		return e.Line
	}
	sort.SliceStable(v.errs, func(i, j int) bool { return key(v.errs[i]) < key(v.errs[j]) })
	return v.errs[0]
}

// at returns the line of the first written key of the study's, falling back
// to the start of the document.
func (v *validator) at(keys ...string) int { return v.s.lines.line(append(keys, "")...) }

func (v *validator) settings() {
	s := v.s
	switch {
	case s.Name == "":
		v.add(v.at("name"), "name is required")
	case !studyName.MatchString(s.Name):
		v.add(v.at("name"), "name: %q must be lower-case letters, digits and '-'", s.Name)
	}
	if s.Rounds < MinRounds {
		v.add(v.at("rounds"), "rounds: %d is below the minimum %d", s.Rounds, MinRounds)
	}
	if s.Warmup < 0 {
		v.add(v.at("warmup"), "warmup: %d is below the minimum 0", s.Warmup)
	}
	if s.Trial <= 0 {
		v.add(v.at("trial"), "trial: %s is not positive: a trial must run its load for some time (e.g. 20s)", formatDuration(s.Trial))
	}
	switch {
	case s.MinPairs < MinRounds:
		v.add(v.at("min_pairs"), "min_pairs: %d is below the minimum %d (an interval needs two pairs)", s.MinPairs, MinRounds)
	case s.MinPairs > s.Rounds && (s.UntilCI <= 0 || s.MinPairs > s.MaxRounds):
		limit, name := s.Rounds, "rounds"
		if s.UntilCI > 0 {
			limit, name = s.MaxRounds, "max_rounds"
		}
		v.add(v.at("min_pairs", name), "min_pairs: %d is above %s (%d), so no verdict could ever be given: lower min_pairs or raise %s", s.MinPairs, name, limit, name)
	}
	if !(s.OutsideCPUMax > 0) || math.IsInf(s.OutsideCPUMax, 0) {
		v.add(v.at("outside_cpu_max"), "outside_cpu_max: %g is not a positive percentage of one core (default %g)", s.OutsideCPUMax, DefaultOutsideCPUMax)
	}
	v.client()
	if s.Order != OrderRandom && s.Order != OrderFixed {
		v.add(v.at("order"), "order: %q is not one of %s, %s", s.Order, OrderRandom, OrderFixed)
	}
	switch {
	case s.UntilCI < 0:
		v.add(v.at("until_ci"), "until_ci: %g is below the minimum 0", s.UntilCI)
	case s.UntilCI >= 100:
		v.add(v.at("until_ci"), "until_ci: %g is not below 100 (it is a percentage)", s.UntilCI)
	}
	switch {
	case s.MaxRounds < MinRounds:
		v.add(v.at("max_rounds"), "max_rounds: %d is below the minimum %d", s.MaxRounds, MinRounds)
	case s.UntilCI > 0 && s.MaxRounds < s.Rounds:
		v.add(v.at("max_rounds", "rounds", "until_ci"), "max_rounds: %d is below rounds (%d)", s.MaxRounds, s.Rounds)
	}
	if s.MaxTime <= 0 {
		v.add(v.at("max_time"), "max_time: %s is not positive", formatDuration(s.MaxTime))
	}
}

// client checks the client host's settings, each at its own line.
func (v *validator) client() {
	s := v.s
	if err := (host.Setting{Client: s.Client}).Validate(); err != nil {
		v.add(v.at("client"), "%v", err)
	}
	if err := (host.Setting{MTU: s.ClientMTU}).Validate(); err != nil {
		v.add(v.at("client_mtu"), "%v", err)
	}
	if s.ClientSubnet != "" {
		if _, err := host.ParseSubnet(s.ClientSubnet); err != nil {
			v.add(v.at("client_subnet"), "%v", err)
		}
	}
}

// quick checks the quick block's values on their own; they are checked
// together with the rest when Apply uses them.
func (v *validator) quick() {
	q := v.s.Quick
	switch {
	case q.Rounds != 0 && q.Rounds < MinRounds:
		v.add(v.at("quick.rounds", "quick"), "quick.rounds: %d is below the minimum %d", q.Rounds, MinRounds)
	case q.Rounds != 0 && q.Rounds < v.s.MinPairs && v.s.UntilCI <= 0:
		v.add(v.at("quick.rounds", "quick"), "quick.rounds: %d is below min_pairs (%d), so --quick could give no verdict: shorten quick.trial instead of cutting rounds", q.Rounds, v.s.MinPairs)
	}
	if q.Warmup != nil && *q.Warmup < 0 {
		v.add(v.at("quick.warmup", "quick"), "quick.warmup: %d is below the minimum 0", *q.Warmup)
	}
	if q.Trial < 0 {
		v.add(v.at("quick.trial", "quick"), "quick.trial: %s is not positive", formatDuration(q.Trial))
	}
	if q.MaxRounds != 0 && q.MaxRounds < MinRounds {
		v.add(v.at("quick.max_rounds", "quick"), "quick.max_rounds: %d is below the minimum %d", q.MaxRounds, MinRounds)
	}
	if q.MaxTime < 0 {
		v.add(v.at("quick.max_time", "quick"), "quick.max_time: %s is not positive", formatDuration(q.MaxTime))
	}
	for _, name := range q.Workloads {
		found := false
		for _, w := range v.s.Workloads {
			found = found || w.Name == name
		}
		if !found {
			v.add(v.at("quick.workloads", "quick"), "quick.workloads: %q is not among the workloads", name)
		}
	}
	for _, name := range q.Platforms {
		if _, ok := v.s.Platform(name); !ok {
			v.add(v.at("quick.platforms", "quick"), "quick.platforms: %q is not among the platforms", name)
		}
	}
	if len(q.Platforms) > 0 && !slices.Contains(q.Platforms, v.s.Baseline) {
		v.add(v.at("quick.platforms", "quick"), "quick.platforms: the baseline %s must be among them", v.s.Baseline)
	}
}

func (v *validator) platforms() {
	s := v.s
	if len(s.Platforms) == 0 {
		v.add(v.at("platforms"), "platforms: at least one platform is required")
		return
	}
	builtins := strings.Join(platform.BuiltinNames(), ", ")
	seen := map[string]int{} // name -> index
	for i, p := range s.Platforms {
		where := fmt.Sprintf("platforms[%d]", i)
		at := func(keys ...string) int {
			if n := p.lines.line(append(keys, "")...); n > 0 {
				return n
			}
			return v.at("platforms")
		}
		if p.Name == "" {
			v.add(at("name"), "%s: name is required", where)
			continue
		}
		if j, dup := seen[p.Name]; dup {
			first := fmt.Sprintf("platforms[%d]", j)
			if n := s.Platforms[j].lines.line(""); n > 0 {
				first = fmt.Sprintf("line %d", n)
			}
			v.add(at("name"), "%s: platform %q is listed twice (first at %s)", where, p.Name, first)
			continue
		}
		seen[p.Name] = i
		if !p.IsVariant() {
			if !platform.IsBuiltin(p.Name) {
				v.add(at("name"), "%s: unknown platform %q (built-in: %s)", where, p.Name, builtins)
			}
			continue
		}
		switch {
		case platform.IsBuiltin(p.Name):
			v.add(at("name"), "%s.name: %q is a built-in platform; give the variant its own name", where, p.Name)
		case !labelName.MatchString(p.Name):
			v.add(at("name"), "%s.name: %q must be lower-case letters, digits, '.', '_' and '-'", where, p.Name)
		}
		switch {
		case p.Base == "":
			v.add(at(), "%s: base is required (built-in: %s)", where, builtins)
		case !platform.IsBuiltin(p.Base):
			v.add(at("base"), "%s.base: unknown platform %q (built-in: %s)", where, p.Base, builtins)
		}
		// Check each option alone so that the error points at its line.
		o := p.Options
		for _, f := range []struct {
			key string
			opt platform.Options
		}{
			{"cpus", platform.Options{CPUs: o.CPUs}},
			{"cpuset", platform.Options{CPUSet: o.CPUSet}},
			{"memory", platform.Options{Memory: o.Memory}},
			{"vcpus", platform.Options{VCPUs: o.VCPUs}},
			{"vm_memory", platform.Options{VMMemory: o.VMMemory}},
			{"pin", platform.Options{Pin: o.Pin}},
			{"place", platform.Options{Place: o.Place}},
		} {
			if err := f.opt.Validate(); err != nil {
				v.add(at("options."+f.key, "options"), "%s.options: %w", where, err)
			}
		}
		if o.Place != "" && platform.IsBuiltin(p.Base) && platform.Family(p.Base) != platform.FamilyKubernetes {
			v.add(at("options.place", "options"), "%s.options.place: place names Kubernetes nodes, so only k8s-* platforms take it (base is %s); to run servers on other machines, name them in a hosts file (--hosts) with its own place:", where, p.Base)
		}
		if m, err := platform.ParsePlace(o.Place); err == nil && m[platform.Driver] != "" && p.Base == platform.K8sHostNet {
			v.add(at("options.place", "options"), "%s.options.place: driver: a hostNetwork pod listens on this machine's client link, which a driver pod does not reach; place the driver on k8s-pod, k8s-service, k8s-nodeport or k8s-guaranteed", where)
		}
	}
}

func (v *validator) workloads(reg *workload.Registry) {
	s := v.s
	if len(s.Workloads) == 0 {
		v.add(v.at("workloads"), "workloads: at least one workload is required")
		return
	}
	known := strings.Join(reg.Names(), ", ")
	seen := map[string]int{}
	for i, w := range s.Workloads {
		where := fmt.Sprintf("workloads[%d]", i)
		at := func(keys ...string) int {
			if n := w.lines.line(append(keys, "")...); n > 0 {
				return n
			}
			return v.at("workloads")
		}
		if w.Kind == "" {
			v.add(at(), "%s: workload is required (known: %s)", where, known)
			continue
		}
		switch j, dup := seen[w.Name]; {
		case w.Name == "":
			v.add(at("name"), "%s: name is required", where)
		case dup:
			v.add(at("name", "workload"), "%s: name %q is already used by workloads[%d]; set name: to tell them apart", where, w.Name, j)
		case !labelName.MatchString(w.Name):
			v.add(at("name", "workload"), "%s.name: %q must be lower-case letters, digits, '.', '_' and '-'", where, w.Name)
		default:
			seen[w.Name] = i
		}
		kind, ok := reg.Get(w.Kind)
		if !ok {
			v.add(at("workload"), "%s.workload: unknown workload %q (known: %s)", where, w.Kind, known)
			continue
		}
		// Resolve one parameter at a time, in file order, so that each
		// error points at its parameter's line.
		names := make([]string, 0, len(w.Params))
		for name := range w.Params {
			names = append(names, name)
		}
		sort.Slice(names, func(a, b int) bool {
			la, lb := w.lines["params."+names[a]], w.lines["params."+names[b]]
			if la != lb {
				return la < lb
			}
			return names[a] < names[b]
		})
		for _, name := range names {
			one := map[string]string{name: w.Params[name]}
			if _, err := workload.Resolve(kind.Params(), one, s.quick); err != nil {
				v.add(at("params."+name, "params"), "%s.params: %w", where, err)
			}
		}
	}
}

func (v *validator) baseline() {
	s := v.s
	if len(s.Platforms) == 0 {
		return
	}
	if _, ok := s.Platform(s.Baseline); !ok {
		v.add(v.at("baseline", "platforms"), "baseline: %q is not among the platforms (%s)", s.Baseline, strings.Join(s.PlatformNames(), ", "))
	}
}

// resolve sets every workload's Values from its Params; the study has been
// validated. With machine set, each workload also checks that this machine
// can run its settings (Apply, with the run's final settings: a full
// study's sizes must not refuse its --quick run, nor a stored run's show).
func (s *Study) resolve(reg *workload.Registry, machine bool) error {
	for i := range s.Workloads {
		w := &s.Workloads[i]
		kind, ok := reg.Get(w.Kind)
		if !ok {
			return &Error{File: s.Source, Line: w.lines.line("workload", ""), Err: fmt.Errorf("unknown workload %q", w.Kind)}
		}
		vals, err := workload.Resolve(kind.Params(), w.Params, s.quick)
		if err != nil {
			return &Error{File: s.Source, Line: w.lines.line("params", ""), Err: fmt.Errorf("workloads[%d].params: %w", i, err)}
		}
		w.Values = vals
		if !machine {
			continue
		}
		// A workload refuses settings it cannot run (a topology the
		// machine cannot place, sizes that do not fit) here, before
		// anything starts, at the workload's line.
		inst, err := kind.New(vals)
		if err != nil {
			return &Error{File: s.Source, Line: w.lines.line("params", ""), Err: fmt.Errorf("workload %s: %w", w.Name, err)}
		}
		if pc, ok := inst.(workload.PlatformChecker); ok {
			for _, p := range s.Platforms {
				if err := pc.CheckPlatform(p.Base, p.Options); err != nil {
					return &Error{File: s.Source, Line: p.lines.line("options", ""), Err: fmt.Errorf("platform %s with workload %s: %w", p.Name, w.Name, err)}
				}
			}
		}
	}
	return nil
}

// Overrides are the command line's changes to a study.
type Overrides struct {
	// Platforms, when set, keeps only the named platforms, in this order; a
	// built-in name the study lacks is added as is. The baseline must be
	// among them.
	Platforms []string
	// Rounds, when > 0, replaces the number of counted rounds.
	Rounds int
	// Trial, when > 0, replaces the trial length.
	Trial time.Duration
	// UntilCI, when > 0, replaces the precision target (percent).
	UntilCI float64
	// CIMetrics, when set, replaces the metrics the target applies to.
	CIMetrics []string
	// Quick applies the study's quick block and the workloads' quick
	// parameter defaults. Rounds, Trial and UntilCI win over it.
	Quick bool
	// Seed, when != 0, replaces the seed.
	Seed int64
	// Client, when set, replaces where the load runs (--client: netns or
	// host).
	Client string
	// Workloads, when set, keeps only the named workloads, in this order;
	// it wins over quick.workloads as Platforms wins over quick.platforms.
	Workloads []string
	// Params set workload parameters as a study file's params would
	// (--set workload.param=value), after Workloads and --quick have chosen
	// the run's workloads.
	Params []ParamSet
}

// ParamSet is one --set: a parameter of the study's workload named
// Workload (or of every workload of that kind) set to Value.
type ParamSet struct {
	Workload, Param, Value string
}

// String is the flag's text, workload.param=value.
func (p ParamSet) String() string { return p.Workload + "." + p.Param + "=" + p.Value }

// ParseParamSet reads "workload.param=value". A workload's name may hold
// dots; a parameter's may not, so the last dot before '=' splits them.
func ParseParamSet(s string) (ParamSet, error) {
	key, value, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(key, '.')
	if !ok || i <= 0 || i == len(key)-1 {
		return ParamSet{}, fmt.Errorf("--set %q: want workload.param=value, e.g. redis-set.clients=50 (workload: a name from the study's workloads or a workload kind)", s)
	}
	return ParamSet{Workload: key[:i], Param: key[i+1:], Value: value}, nil
}

// Validate checks the overrides on their own; errors name the flag.
func (o Overrides) Validate() error {
	if o.Rounds < 0 || o.Rounds > 0 && o.Rounds < MinRounds {
		return fmt.Errorf("--rounds %d: below the minimum %d", o.Rounds, MinRounds)
	}
	if o.Trial < 0 {
		return fmt.Errorf("--trial %s: not positive", formatDuration(o.Trial))
	}
	if o.UntilCI < 0 || o.UntilCI >= 100 {
		return fmt.Errorf("--until-ci %g: want a percentage above 0 and below 100", o.UntilCI)
	}
	if o.Client != "" && !slices.Contains(host.Settings, o.Client) {
		return fmt.Errorf("--client %q: want %s (netns: the load from a network namespace over a veth; host: on this machine over loopback)", o.Client, strings.Join(host.Settings, " or "))
	}
	for _, l := range []struct {
		flag  string
		names []string
	}{{"--platforms", o.Platforms}, {"--workloads", o.Workloads}} {
		seen := map[string]bool{}
		for _, name := range l.names {
			if name == "" {
				return fmt.Errorf("%s: empty name", l.flag)
			}
			if seen[name] {
				return fmt.Errorf("%s: %q is listed twice", l.flag, name)
			}
			seen[name] = true
		}
	}
	return nil
}

// Apply changes the study as the overrides say, chooses a seed if it has
// none, re-checks it against reg and re-resolves the workloads' parameters.
// On error the study is left unchanged. Call Apply, with zero Overrides if
// need be, before running a study.
func (s *Study) Apply(o Overrides, reg *workload.Registry) error {
	if err := o.Validate(); err != nil {
		return err
	}
	c := *s
	c.Platforms = slices.Clone(s.Platforms)
	c.Workloads = slices.Clone(s.Workloads)
	if o.Quick {
		c.applyQuick(len(o.Platforms) == 0, len(o.Workloads) == 0)
	}
	if len(o.Workloads) > 0 {
		if err := c.selectWorkloads(s.Workloads, o.Workloads); err != nil {
			return err
		}
	}
	if err := c.setParams(o.Params, reg); err != nil {
		return err
	}
	if len(o.Platforms) > 0 {
		// --platforms wins over quick.platforms, which then names
		// platforms the run may not have.
		c.Platforms = slices.Clone(s.Platforms)
		c.Quick.Platforms = nil
	}
	if o.Rounds > 0 {
		c.Rounds = o.Rounds
	}
	if o.Trial > 0 {
		c.Trial = o.Trial
	}
	if len(o.CIMetrics) > 0 {
		c.UntilCIMetrics = o.CIMetrics
	}
	if o.UntilCI > 0 {
		c.UntilCI = o.UntilCI
	}
	if o.Seed != 0 {
		c.Seed = o.Seed
	}
	if o.Client != "" {
		c.Client = o.Client
	}
	if c.Seed == 0 {
		c.Seed = NewSeed()
	}
	if c.UntilCI > 0 && c.MaxRounds < c.Rounds {
		switch {
		case o.Rounds > 0:
			return fmt.Errorf("--rounds %d: above the study's max_rounds (%d)", o.Rounds, c.MaxRounds)
		case o.UntilCI > 0:
			return fmt.Errorf("--until-ci %g: the study's max_rounds (%d) is below its rounds (%d)", o.UntilCI, c.MaxRounds, c.Rounds)
		}
	}
	if o.Rounds > 0 && o.Rounds < c.MinPairs && (c.UntilCI <= 0 || c.MaxRounds < c.MinPairs) {
		return fmt.Errorf("--rounds %d: below the study's min_pairs (%d), so no cell could get a verdict: give at least %d", o.Rounds, c.MinPairs, c.MinPairs)
	}
	if len(o.Platforms) > 0 {
		if err := c.selectPlatforms(o.Platforms); err != nil {
			return err
		}
	}
	c.pruneQuick()
	if err := c.Validate(reg); err != nil {
		return err
	}
	if err := c.resolve(reg, true); err != nil {
		return err
	}
	*s = c
	return nil
}

// applyQuick applies the quick block; platforms and workloads say whether
// its platforms and workloads apply (not when --platforms or --workloads
// name them).
func (s *Study) applyQuick(platforms, workloads bool) {
	s.quick = true
	q := s.Quick
	if q.Rounds > 0 {
		s.Rounds = q.Rounds
	}
	if q.Warmup != nil {
		s.Warmup = *q.Warmup
	}
	if q.Trial > 0 {
		s.Trial = q.Trial
	}
	if q.MaxRounds > 0 {
		s.MaxRounds = q.MaxRounds
	}
	if q.MaxTime > 0 {
		s.MaxTime = q.MaxTime
	}
	if workloads && len(q.Workloads) > 0 {
		keep := map[string]bool{}
		for _, name := range q.Workloads {
			keep[name] = true
		}
		var ws []Workload
		for _, w := range s.Workloads {
			if keep[w.Name] {
				ws = append(ws, w)
			}
		}
		s.Workloads = ws
	}
	if platforms && len(q.Platforms) > 0 {
		var ps []Platform
		for _, p := range s.Platforms {
			if slices.Contains(q.Platforms, p.Name) {
				ps = append(ps, p)
			} else {
				s.QuickLeftOut = append(s.QuickLeftOut, p.Name)
			}
		}
		s.Platforms = ps
	}
}

// selectWorkloads keeps the named workloads of all (the study's, before
// --quick chose some) in the given order, and drops quick.workloads, which
// --workloads replaces.
func (s *Study) selectWorkloads(all []Workload, names []string) error {
	var ws []Workload
	for _, name := range names {
		i := slices.IndexFunc(all, func(w Workload) bool { return w.Name == name })
		if i < 0 {
			var have []string
			for _, w := range all {
				have = append(have, w.Name)
			}
			return fmt.Errorf("--workloads: %q is not a workload of study %s (its workloads: %s)", name, s.Name, strings.Join(have, ", "))
		}
		ws = append(ws, all[i])
	}
	s.Workloads = ws
	s.Quick.Workloads = nil
	return nil
}

// setParams applies --set: each names a workload of the run (or a kind,
// for all its workloads) and one of its parameters, and the value is
// checked as a study file's would be; the error names the flag, the
// parameter and what it takes.
func (s *Study) setParams(sets []ParamSet, reg *workload.Registry) error {
	for _, ps := range sets {
		var idx []int
		for i, w := range s.Workloads {
			if w.Name == ps.Workload {
				idx = []int{i}
				break
			}
			if w.Kind == ps.Workload {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			var have []string
			for _, w := range s.Workloads {
				have = append(have, w.Name+" ("+w.Kind+")")
			}
			return fmt.Errorf("--set %s: no workload %q in this run (its workloads: %s)", ps, ps.Workload, strings.Join(have, ", "))
		}
		for _, i := range idx {
			w := &s.Workloads[i]
			kind, ok := reg.Get(w.Kind)
			if !ok {
				return fmt.Errorf("--set %s: unknown workload kind %q", ps, w.Kind)
			}
			params := kind.Params()
			if _, err := workload.Resolve(params, map[string]string{ps.Param: ps.Value}, s.quick); err != nil {
				if j := slices.IndexFunc(params, func(p workload.Param) bool { return p.Name == ps.Param }); j >= 0 {
					return fmt.Errorf("--set %s: %w (%s takes %s)", ps, err, ps.Param, params[j].Takes())
				}
				return fmt.Errorf("--set %s: workload %s (%s): %w", ps, w.Name, w.Kind, err)
			}
			if j := slices.IndexFunc(params, func(p workload.Param) bool { return p.Name == ps.Param }); j >= 0 {
				if err := checkPlatformNames(params[j], ps.Value, s.PlatformNames()); err != nil {
					return fmt.Errorf("--set %s: parameter %s: %w", ps, ps.Param, err)
				}
			}
			p := maps.Clone(w.Params)
			if p == nil {
				p = map[string]string{}
			}
			p[ps.Param] = ps.Value
			w.Params = p
		}
	}
	return nil
}

// selectPlatforms keeps the named platforms in the given order.
func (s *Study) selectPlatforms(names []string) error {
	var ps []Platform
	for _, name := range names {
		p, ok := s.Platform(name)
		switch {
		case ok:
		case platform.IsBuiltin(name):
			p = Platform{Name: name, Base: name}
		default:
			return fmt.Errorf("--platforms: unknown platform %q (in the study: %s; built-in: %s)",
				name, strings.Join(s.PlatformNames(), ", "), strings.Join(platform.BuiltinNames(), ", "))
		}
		ps = append(ps, p)
	}
	if !slices.Contains(names, s.Baseline) {
		return fmt.Errorf("--platforms: the baseline %s must be among the platforms (given: %s)", s.Baseline, strings.Join(names, ", "))
	}
	s.Platforms = ps
	return nil
}

// KeepPlatforms keeps, in order, only the platforms keep accepts (a run
// that skips the platforms that cannot run here), and drops the others from
// the quick block too, so that the study, and the YAML it writes, names no
// platform it does not have.
func (s *Study) KeepPlatforms(keep func(name string) bool) {
	var ps []Platform
	for _, p := range s.Platforms {
		if keep(p.Name) {
			ps = append(ps, p)
		}
	}
	s.Platforms = ps
	s.pruneQuick()
}

// pruneQuick drops from the quick block the platforms the study no longer
// has: a stored study whose quick.platforms names a platform it lacks does
// not parse back.
func (s *Study) pruneQuick() {
	if len(s.Quick.Platforms) == 0 {
		return
	}
	var keep []string
	for _, name := range s.Quick.Platforms {
		if _, ok := s.Platform(name); ok {
			keep = append(keep, name)
		}
	}
	s.Quick.Platforms = keep
}

// NewSeed returns a random seed for a study that has none: positive and
// short enough to read and type.
func NewSeed() int64 { return rand.Int64N(math.MaxInt32) + 1 }
