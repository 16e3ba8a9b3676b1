// Package study reads, checks and schedules studies: a set of workloads run on
// a set of platforms for several rounds of trials, each platform reported
// relative to a baseline platform.
//
// A study is a YAML file (or one of the built-in studies embedded from the
// top-level studies package):
//
//	name: redis                  # required, [a-z0-9-]+
//	description: Redis SET/GET throughput
//	baseline: native             # default native; one of the study's platforms
//	rounds: 5                    # counted rounds, >= 2
//	warmup: 1                    # warm-up rounds, not counted, >= 0
//	trial: 20s                   # trial (load) length
//	order: random                # random: a fresh shuffle each round; fixed: as listed
//	seed: 0                      # 0: chosen at run time and recorded
//	min_pairs: 5                 # no verdict from fewer pairs (2..rounds)
//	outside_cpu_max: 5           # % of a core other processes may use before a trial counts as disturbed
//	client: netns                # where the load runs: netns (a namespace of its own, over a veth) or host (loopback)
//	client_mtu: 1500             # the netns client's link MTU, 576..65535
//	client_subnet: 10.214.7.0/30 # the netns client's link; default: a free /30 of 10.214.0.0/16
//	until_ci: 0                  # percent; > 0: add rounds until every CI half-width <= this
//	max_rounds: 40               # cap for until_ci
//	max_time: 1h                 # cap for until_ci
//	platforms:
//	  - native
//	  - {name: native-q08, base: native, options: {cpus: 0.8, cpuset: "0", memory: 512m}}
//	  - {name: vm-4, base: vm, options: {vcpus: 4, vm_memory: 4g}}
//	workloads:
//	  - workload: redis
//	    name: redis-set
//	    params: {op: set, clients: 1000}
//	quick: {rounds: 3, warmup: 1, trial: 5s, max_rounds: 10, max_time: 4m, workloads: [redis-set], platforms: [native, vm-4]}
//
// Reading is done in two steps, k6 style: decoding turns the YAML into a Study
// and rejects what only the file can get wrong (unknown keys, wrong types);
// Validate then checks the settings themselves. Every error from either step
// is one line starting with "file:line: ".
package study

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/studies"
)

// Orders of trials within a round.
const (
	// OrderRandom runs each round in a fresh random order drawn from the seed.
	OrderRandom = "random"
	// OrderFixed runs each round in study order.
	OrderFixed = "fixed"
)

// Defaults for settings a study file leaves out.
const (
	DefaultBaseline  = platform.Native
	DefaultRounds    = 5
	DefaultWarmup    = 1
	DefaultTrial     = 20 * time.Second
	DefaultOrder     = OrderRandom
	DefaultMaxRounds = 40
	DefaultMaxTime   = time.Hour
	// DefaultClient is where a study file's load runs when it does not
	// say: a network namespace of its own, reached over a veth, as the
	// seeds' clients reached servers through a NIC.
	DefaultClient = host.SettingNetns
	// DefaultMinPairs and DefaultOutsideCPUMax are the verdict rule's and
	// the CPU account's defaults.
	DefaultMinPairs      = stats.DefaultMinPairs
	DefaultOutsideCPUMax = workload.DefaultOutsideCPUMax
)

// MinRounds is the fewest counted rounds a study may have: a spread needs two.
const MinRounds = 2

// Platform is one platform of a study: a built-in platform, or a variant of
// one with its own name and resource options.
type Platform struct {
	// Name is the platform's name in the study and in reports.
	Name string
	// Base is the built-in platform it runs on; Base == Name for a built-in
	// used as is.
	Base string
	// Options are the resource settings of a variant.
	Options platform.Options

	variant bool  // written as {name, base, options} in the file
	lines   lines // "" (the item), "name", "base", "options", "options.cpus", ...
}

// IsVariant reports whether p is a variant rather than a built-in used as is.
func (p Platform) IsVariant() bool {
	return p.variant || p.Name != p.Base || p.Options != (platform.Options{})
}

// Workload is one workload of a study.
type Workload struct {
	// Name labels the workload in the study and in reports; unique.
	Name string
	// Kind is the workload's name in the registry.
	Kind string
	// Params are the parameters as written in the study, unchecked strings.
	Params map[string]string
	// Values are the parameters resolved against the workload's declaration
	// (defaults, quick defaults under --quick, then Params). Parse and Apply
	// fill them in.
	Values workload.Values

	lines lines // "" (the item), "workload", "name", "params", "params.<name>"
}

// Quick holds what --quick changes; a zero field (nil Warmup) changes nothing.
type Quick struct {
	Rounds    int
	Warmup    *int // nil: unchanged (0 is a valid warm-up count)
	Trial     time.Duration
	MaxRounds int
	MaxTime   time.Duration
	// Workloads, when set, names the workloads --quick keeps (in study
	// order); a study with many workload points runs a few of them.
	Workloads []string
	// Platforms, when set, names the platforms --quick keeps (in study
	// order; the baseline among them), when a study's full set cannot fit
	// a quick run's time. An explicit --platforms wins over it. The run
	// says which platforms it left out (Study.QuickLeftOut).
	Platforms []string
}

// Study is a study's settings: what to run, where, and how often.
type Study struct {
	Name        string
	Description string
	// Baseline names the platform every other platform is compared with.
	Baseline string
	// Rounds is the number of counted rounds; with UntilCI it is the minimum.
	Rounds int
	// Warmup is the number of rounds run first and not counted.
	Warmup int
	// Trial is how long each trial's load runs.
	Trial time.Duration
	// Order is OrderRandom or OrderFixed.
	Order string
	// Seed drives the random order; 0 means Apply chooses one.
	Seed int64
	// MinPairs is the fewest pairs a verdict may rest on: no cell of fewer
	// counted pairs gets one, and --until-ci never stops below it.
	MinPairs int
	// OutsideCPUMax is the CPU (percent of one core) processes outside the
	// run may use during a trial's load before the trial is marked
	// disturbed.
	OutsideCPUMax float64
	// Client is where the load runs: host.SettingNetns or
	// host.SettingHost. Empty is host: a study built in code, or a run
	// stored before client hosts existed (Load sets DefaultClient for a
	// study file that does not say).
	Client string
	// ClientMTU is the netns client's link MTU (0: host.DefaultMTU), and
	// ClientSubnet its subnet ("": a free /30 of host.Pool).
	ClientMTU    int
	ClientSubnet string
	// Hosts is the hosts file (package hostfile) whose machines run the
	// study over SSH, as its author wrote it ("": this machine only); see
	// HostsPath.
	Hosts string
	// UntilCI, when > 0, asks for rounds to be added until every ratio's 95%
	// confidence-interval half-width is at most this many percent, capped by
	// MaxRounds and MaxTime.
	UntilCI float64
	// UntilCIMetrics, when set, names the metrics whose ratios must reach
	// UntilCI; by default every non-diagnostic metric must (tail latencies
	// may then take many rounds).
	UntilCIMetrics []string
	MaxRounds      int
	MaxTime        time.Duration
	Platforms      []Platform
	Workloads      []Workload
	Quick          Quick
	// QuickLeftOut names the platforms quick.platforms left out of this
	// run (set by Apply with --quick), so that the run can say so.
	QuickLeftOut []string
	// Source names where the study came from ("studies/redis.yaml" for a
	// built-in, else the path given); errors start with it.
	Source string

	quick bool  // Apply ran with Quick: params resolve with quick defaults
	lines lines // "" (the document), top-level keys, "quick.<key>"
}

// New returns a study with every setting at its default, for building a
// study in code.
func New(name string) *Study {
	return &Study{
		Name:      name,
		Baseline:  DefaultBaseline,
		Rounds:    DefaultRounds,
		Warmup:    DefaultWarmup,
		Trial:     DefaultTrial,
		Order:     DefaultOrder,
		MaxRounds: DefaultMaxRounds,
		MaxTime:   DefaultMaxTime,
		MinPairs:  DefaultMinPairs,

		OutsideCPUMax: DefaultOutsideCPUMax,
	}
}

// ClientSetting is what the study asks of its client host.
func (s *Study) ClientSetting() host.Setting {
	set := host.Setting{Client: s.Client, MTU: s.ClientMTU}
	if s.ClientSubnet != "" {
		set.Subnet, _ = host.ParseSubnet(s.ClientSubnet) // validated
	}
	return set
}

// Unit is one cell of a study: a workload on a platform. A round runs every
// unit once.
type Unit struct {
	Workload Workload
	Platform Platform
}

// String is "workload/platform".
func (u Unit) String() string { return u.Workload.Name + "/" + u.Platform.Name }

// Units returns the cross product of workloads and platforms in study order:
// every platform of the first workload, then of the second, and so on.
func (s *Study) Units() []Unit {
	units := make([]Unit, 0, len(s.Workloads)*len(s.Platforms))
	for _, w := range s.Workloads {
		for _, p := range s.Platforms {
			units = append(units, Unit{Workload: w, Platform: p})
		}
	}
	return units
}

// Platform returns the study's platform named name.
func (s *Study) Platform(name string) (Platform, bool) {
	for _, p := range s.Platforms {
		if p.Name == name {
			return p, true
		}
	}
	return Platform{}, false
}

// PlatformNames returns the platforms' names in study order.
func (s *Study) PlatformNames() []string {
	names := make([]string, len(s.Platforms))
	for i, p := range s.Platforms {
		names[i] = p.Name
	}
	return names
}

// Error is a problem at a place in a study file. Its text is one line,
// "file:line: message".
type Error struct {
	File string
	Line int // 0 when unknown
	Err  error
}

// Error returns "file:line: message" ("file: message" without a line).
func (e *Error) Error() string {
	switch {
	case e.File == "":
		return e.Err.Error()
	case e.Line <= 0:
		return e.File + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the problem without its place.
func (e *Error) Unwrap() error { return e.Err }

// lines maps a field path to the line it was written on.
type lines map[string]int

// line returns the line of the first of keys that was written, else 0.
func (l lines) line(keys ...string) int {
	for _, k := range keys {
		if n, ok := l[k]; ok {
			return n
		}
	}
	return 0
}

// Parse reads a study from data, which came from filename (used in errors),
// checks it against reg and resolves the workloads' parameters. Whether
// this machine can run it is Apply's to check.
func Parse(data []byte, filename string, reg *workload.Registry) (*Study, error) {
	s, err := decode(data, filename)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(reg); err != nil {
		return nil, err
	}
	if err := s.resolve(reg, false); err != nil {
		return nil, err
	}
	return s, nil
}

// Info describes a built-in study.
type Info struct {
	Name        string
	Description string
}

// Builtins lists the built-in studies sorted by name.
func Builtins() ([]Info, error) {
	names, err := builtinNames()
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(names))
	for _, name := range names {
		file := builtinFile(name)
		data, err := fs.ReadFile(studies.FS, path.Base(file))
		if err != nil {
			return nil, fmt.Errorf("reading built-in study %s: %w", name, err)
		}
		s, err := decode(data, file)
		if err != nil {
			return nil, err
		}
		infos = append(infos, Info{Name: s.Name, Description: s.Description})
	}
	return infos, nil
}

// Load reads the built-in study named nameOrPath, or else the study file at
// that path, and parses it against reg.
func Load(nameOrPath string, reg *workload.Registry) (*Study, error) {
	if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".yaml") {
		file := builtinFile(nameOrPath)
		if data, err := fs.ReadFile(studies.FS, path.Base(file)); err == nil {
			return parseFile(data, file, reg)
		}
	}
	data, err := os.ReadFile(nameOrPath)
	if errors.Is(err, fs.ErrNotExist) {
		names, nerr := builtinNames()
		if nerr != nil {
			return nil, nerr
		}
		return nil, &notFoundError{name: nameOrPath, builtins: names}
	}
	if err != nil {
		return nil, fmt.Errorf("reading study: %w", err)
	}
	return parseFile(data, nameOrPath, reg)
}

// parseFile parses a study as its author wrote it: beyond Parse, a
// parameter that names platforms (workload.Param.Platforms) may name only
// the study's own. (A stored run's study is not held to it: --quick and
// --platforms keep fewer platforms than its parameters name.)
func parseFile(data []byte, filename string, reg *workload.Registry) (*Study, error) {
	s, err := Parse(data, filename, reg)
	if err != nil {
		return nil, err
	}
	if s.Client == "" {
		s.Client = DefaultClient
	}
	names := s.PlatformNames()
	for i, w := range s.Workloads {
		kind, _ := reg.Get(w.Kind)
		for _, p := range kind.Params() {
			if err := checkPlatformNames(p, w.Params[p.Name], names); err != nil {
				return nil, &Error{File: filename, Line: w.lines.line("params."+p.Name, "params"),
					Err: fmt.Errorf("workloads[%d].params.%s: %w", i, p.Name, err)}
			}
		}
	}
	return s, nil
}

// checkPlatformNames checks the value of a parameter that names platforms
// (workload.Param.Platforms): each name is one of the study's platforms
// or one of the parameter's keywords.
func checkPlatformNames(p workload.Param, value string, names []string) error {
	if !p.Platforms || value == "" {
		return nil
	}
	for _, n := range strings.Split(value, ",") {
		if n = strings.TrimSpace(n); n == "" || slices.Contains(names, n) || slices.Contains(p.Keywords, n) {
			continue
		}
		also := ""
		if len(p.Keywords) > 0 {
			also = " or " + strings.Join(p.Keywords, ", ")
		}
		return fmt.Errorf("%q is not a platform of this study (%s%s)", n, strings.Join(names, ", "), also)
	}
	return nil
}

// notFoundError says that a study is neither built in nor a file; it wraps
// fs.ErrNotExist.
type notFoundError struct {
	name     string
	builtins []string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("no built-in study or file named %s (built-in: %s)", e.name, strings.Join(e.builtins, ", "))
}

func (e *notFoundError) Unwrap() error { return fs.ErrNotExist }

// builtinFile is the name errors use for a built-in study's file.
func builtinFile(name string) string { return "studies/" + name + ".yaml" }

// builtinNames returns the names of the embedded study files, sorted.
func builtinNames() ([]string, error) {
	entries, err := fs.ReadDir(studies.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("listing built-in studies: %w", err)
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	return names, nil
}

// HostsPath is the study's hosts file, relative to the study file's
// directory when the study came from a file; "" when it names none.
func (s *Study) HostsPath() string {
	if s.Hosts == "" || filepath.IsAbs(s.Hosts) || s.Source == "" || !strings.ContainsAny(s.Source, `/\`) {
		return s.Hosts
	}
	return filepath.Join(filepath.Dir(s.Source), s.Hosts)
}
