// Package workload defines what a workload is to the study engine: the servers
// it starts on a platform, the load it drives from the host, and the metrics it
// reports. Implementations live in sub-packages (redis, ...).
package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/placement"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/search"
)

// ParamType is the type of a workload parameter.
type ParamType string

// Parameter types accepted in study files.
const (
	Int      ParamType = "int"
	Float    ParamType = "float"
	String   ParamType = "string"
	Bool     ParamType = "bool"
	Duration ParamType = "duration"
)

// Param declares one parameter of a workload.
type Param struct {
	Name    string
	Type    ParamType
	Default string   // as it would be written in a study file
	Quick   string   // default under --quick, when it differs ("" = same)
	Enum    []string // allowed values for strings, when restricted
	Min     float64  // lower bound for numbers (inclusive), when HasMin
	HasMin  bool
	Help    string
	// Optional parameters may be empty ("" = not set: the workload
	// decides, e.g. the trial length), whatever their type.
	Optional bool
	// Platforms marks a comma-separated list of the study's platform names
	// (vm_split, pin_platforms): a study file naming a platform it does not
	// have is refused. Keywords are the other words the list may hold
	// ("all").
	Platforms bool
	Keywords  []string
}

// Check parses v as this parameter's type and checks its bounds. An
// Optional parameter may also be empty (unset, as a run stores it).
func (p Param) Check(v string) error {
	if v == "" && p.Optional {
		return nil
	}
	switch p.Type {
	case Int:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("parameter %s: %q is not an integer", p.Name, v)
		}
		if p.HasMin && float64(n) < p.Min {
			return fmt.Errorf("parameter %s: %d is below the minimum %g", p.Name, n, p.Min)
		}
	case Float:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("parameter %s: %q is not a number", p.Name, v)
		}
		if p.HasMin && f < p.Min {
			return fmt.Errorf("parameter %s: %g is below the minimum %g", p.Name, f, p.Min)
		}
	case Bool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("parameter %s: %q is not true or false", p.Name, v)
		}
	case Duration:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("parameter %s: %q is not a positive duration (e.g. 30s, 2m)", p.Name, v)
		}
	case String:
		if len(p.Enum) > 0 {
			for _, e := range p.Enum {
				if e == v {
					return nil
				}
			}
			return fmt.Errorf("parameter %s: %q is not one of %s", p.Name, v, strings.Join(p.Enum, ", "))
		}
	default:
		return fmt.Errorf("parameter %s: unknown type %q", p.Name, p.Type)
	}
	return nil
}

// Takes says in words what values the parameter accepts and its default,
// for errors about a value given on the command line: "one of set, get;
// default set", "an integer of at least 1; default 1000".
func (p Param) Takes() string {
	var s string
	switch {
	case len(p.Enum) > 0:
		s = "one of " + strings.Join(p.Enum, ", ")
	case p.Type == Int:
		s = "an integer"
	case p.Type == Float:
		s = "a number"
	case p.Type == Bool:
		s = "true or false"
	case p.Type == Duration:
		s = "a positive duration such as 30s or 2m"
	default:
		s = "text"
	}
	if p.HasMin && (p.Type == Int || p.Type == Float) {
		s += fmt.Sprintf(" of at least %g", p.Min)
	}
	if p.Optional {
		s += ", or empty"
	}
	def := p.Default
	if def == "" {
		def = `""`
	}
	return s + "; default " + def
}

// Values are a workload's parameters after defaults and overrides, all checked.
type Values map[string]string

// Int returns an int parameter; Values are checked before use, so a parse
// error here is a programming error.
func (v Values) Int(name string) int {
	n, err := strconv.Atoi(v[name])
	if err != nil {
		panic(fmt.Sprintf("workload: parameter %s=%q read as int: %v", name, v[name], err))
	}
	return n
}

// Float returns a float parameter.
func (v Values) Float(name string) float64 {
	f, err := strconv.ParseFloat(v[name], 64)
	if err != nil {
		panic(fmt.Sprintf("workload: parameter %s=%q read as float: %v", name, v[name], err))
	}
	return f
}

// Bool returns a bool parameter.
func (v Values) Bool(name string) bool {
	b, err := strconv.ParseBool(v[name])
	if err != nil {
		panic(fmt.Sprintf("workload: parameter %s=%q read as bool: %v", name, v[name], err))
	}
	return b
}

// Duration returns a duration parameter.
func (v Values) Duration(name string) time.Duration {
	d, err := time.ParseDuration(v[name])
	if err != nil {
		panic(fmt.Sprintf("workload: parameter %s=%q read as duration: %v", name, v[name], err))
	}
	return d
}

// String returns a string parameter.
func (v Values) String(name string) string { return v[name] }

// Canonical renders the values sorted by name, for records and hashing.
func (v Values) Canonical() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + v[k])
	}
	return b.String()
}

// Resolve applies defaults (quick defaults when quick) and the given overrides
// to params, checking every value and rejecting unknown names.
func Resolve(params []Param, overrides map[string]string, quick bool) (Values, error) {
	out := Values{}
	known := map[string]Param{}
	for _, p := range params {
		known[p.Name] = p
		out[p.Name] = p.Default
		if quick && p.Quick != "" {
			out[p.Name] = p.Quick
		}
	}
	for k, v := range overrides {
		p, ok := known[k]
		if !ok {
			var names []string
			for _, p := range params {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(names, ", "))
		}
		if err := p.Check(v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// Metric describes one value a workload reports per trial.
type Metric struct {
	Name           string
	Unit           string
	HigherIsBetter bool
	Help           string
	// Diagnostic metrics (the driver's own CPU use, ...) explain a result;
	// reports show them apart, without a verdict, and they do not count
	// toward --until-ci's precision.
	Diagnostic bool
	// Quantile is q when the metric is a q-quantile of per-operation
	// observations (0.99 for a p99 latency), else 0. Every trial must then
	// say in Result.Samples how many observations it came from: a verdict
	// needs at least stats.MinTailSamples(q) of them in every trial.
	Quantile float64
}

// Trial is what the engine hands a workload for one trial.
type Trial struct {
	// Run is the run the trial belongs to; client processes carry it in
	// their environment so cleanup finds them after a crash.
	Run runid.ID
	// Name identifies the trial in log and raw-output file names.
	Name string
	// Round is the trial's round (warm-up rounds first, from 0): a
	// workload that draws random choices may draw the same ones for every
	// platform of a round (common random numbers) and new ones each round.
	Round    int
	Platform platform.Platform
	// Duration is the study's trial length: how long the load should run.
	Duration time.Duration
	// RawDir is where the workload saves each tool's raw output.
	RawDir string
	// LogDir is the run's log directory, beside RawDir, where platforms
	// write their servers' output (platform.Env.LogDir): a workload reads
	// a server's log there, and points the data loads it runs itself at it.
	LogDir string
	// Log receives progress lines meant for the run log.
	Log io.Writer
	// Host is the native platform of the roles of a topology that run
	// beside the load driver whatever the platform: on the client host,
	// listening on its ClientAddr (nil when the engine was given none).
	Host HostPlatform
	// Local is this machine's native platform on loopback: workloads build
	// the data templates they cache on this machine through it (see
	// Builder), whatever host the trial's servers and load run on.
	Local HostPlatform
	// Client is where the trial's load runs and how it reaches the
	// platform's servers (nil: on this machine over loopback; see
	// ClientHost). Load generators run through it: RunClient, the
	// driver's Config.Client.
	Client host.Host
	// Steps, when not nil, keeps the steps of a search run within the trial
	// (find-max), stored as they end, so that a trial interrupted and run
	// again resumes its search; nil: keep them in memory (search.MemLog).
	Steps search.StepLog
	// Series, when not nil, stores the per-second series of the trial's
	// driver runs.
	Series SeriesSink
}

// HostPlatform is what a trial's Host does: start servers, run one-shot
// jobs (data loads) and deploy the roles of a topology that run beside the
// driver. The native platform (native.Beside) is one.
type HostPlatform interface {
	platform.Platform
	platform.JobRunner
	deploy.Backend
}

// Builder is the platform a workload builds its data templates with:
// t.Local, or t.Host when the engine gave no Local (nil when neither). A
// template is kept on this machine; with hosts of a hosts file, Host runs
// on a driver host, whose files do not come back here.
func (t Trial) Builder() HostPlatform {
	if t.Local != nil {
		return t.Local
	}
	return t.Host
}

// ClientHost is t.Client, or the loopback host when it is nil.
func (t Trial) ClientHost() host.Host { return host.Or(t.Client) }

// Result is what one trial measured.
type Result struct {
	// Values maps metric names (as declared by Metrics) to measured values.
	Values map[string]float64
	// Commands are the exact command lines run, servers and clients.
	Commands []string
	// Where describes where each server ran.
	Where []string
	// Notes are warnings about this trial (driver saturated, ...).
	Notes []string
	// Layout, for workloads that deploy a topology, records where each
	// server ran and what was observed on the CPUs during the load
	// (deploy.Observer); the engine stores it with the trial.
	Layout *placement.Record
	// Samples maps a metric name to the number of observations behind its
	// value (the requests a latency percentile was computed from); required
	// for metrics with a Quantile.
	Samples map[string]int64
	// Unmeasured names declared metrics this trial has, on purpose, no value
	// for (a find-max search with no standing pass has no maximum to
	// measure the CPU or the p99 at); its Notes say why. Any other declared
	// metric without a value fails the trial.
	Unmeasured []string
}

// Instance is a workload with its parameters fixed.
type Instance interface {
	// Metrics lists the metrics every successful trial reports.
	Metrics() []Metric
	// Run performs one trial: start servers on the platform, drive the load,
	// stop the servers, return the measurements. A failed trial returns an
	// error that points to the raw output it saved.
	Run(ctx context.Context, t Trial) (Result, error)
}

// SizeNote starts the trial note in which a workload states a size it
// scaled to the machine (a matrix, arrays, a file); reports repeat that note
// once per workload.
const SizeNote = "size: "

// CliffNote starts the trial note in which a workload names what it knows
// to be behind a latency cliff it met (TCP's, not the platform's); reports
// repeat that note once per workload and platform.
const CliffNote = "latency cliff: "

// Estimator is implemented by instances whose trials take noticeably
// longer than the study's trial length (sizing, data layout, checks):
// Estimate returns the expected wall time of one trial of length trial,
// not counting the platform's own start-up. Instances without it are
// expected to take about the trial length.
type Estimator interface {
	Estimate(trial time.Duration) time.Duration
}

// PlatformChecker is an Instance that refuses a study's platform whose
// options it cannot run (a platform variant's pin: spread with more servers
// than cores), before anything starts.
type PlatformChecker interface {
	// CheckPlatform returns the reason a platform built on base, with
	// options o, cannot run this instance; nil when it can. The caller
	// names the platform in the error.
	CheckPlatform(base string, o platform.Options) error
}

// PlatformRefuser is an Instance that cannot give a comparable result on
// some kinds of platform, whatever their options (fio's direct I/O under
// gVisor, which does not pass O_DIRECT on to the host's file): the engine
// runs no trial of the workload on such a platform and says why with the
// run, while the workload runs on the other platforms and the platform runs
// the other workloads. A PlatformChecker's refusal, by contrast, is a
// mistake in the study and stops it before it starts.
type PlatformRefuser interface {
	// RefusePlatform returns why the instance gives no comparable result
	// on the platform p of kind base (p is nil where only the kind is
	// known: a refusal that depends on how p was set up, a sandbox's
	// network stack, then refuses nothing); nil when it does.
	RefusePlatform(base string, p platform.Platform) error
}

// Refusal is why in refuses platform p of kind base (PlatformRefuser), or
// nil.
func Refusal(in Instance, base string, p platform.Platform) error {
	if r, ok := in.(PlatformRefuser); ok {
		return r.RefusePlatform(base, p)
	}
	return nil
}

// Workload is a kind of workload, before its parameters are chosen.
type Workload interface {
	Name() string
	// Description is one line for `nearnative workloads`.
	Description() string
	Params() []Param
	// New builds an instance from resolved values.
	New(v Values) (Instance, error)
}

// Registry holds the known workloads by name.
type Registry struct{ byName map[string]Workload }

// NewRegistry returns a registry holding ws.
func NewRegistry(ws ...Workload) *Registry {
	r := &Registry{byName: map[string]Workload{}}
	for _, w := range ws {
		r.byName[w.Name()] = w
	}
	return r
}

// Get returns the workload named name.
func (r *Registry) Get(name string) (Workload, bool) {
	w, ok := r.byName[name]
	return w, ok
}

// All returns every workload sorted by name.
func (r *Registry) All() []Workload {
	var ws []Workload
	for _, w := range r.byName {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Name() < ws[j].Name() })
	return ws
}

// Names returns the sorted workload names.
func (r *Registry) Names() []string {
	var n []string
	for _, w := range r.All() {
		n = append(n, w.Name())
	}
	return n
}

// ErrUnitStopped is matched (errors.Is) by a trial's error after which the
// same workload on the same platform cannot give a result in later rounds
// either: its servers do not start there, its search finds no load that
// passes. The engine stores the failed trial, runs no more trials of that
// cell, says so with the run, and goes on with the other cells (a failure
// that only this trial met is an ordinary error).
var ErrUnitStopped = errors.New("no further trials of this workload on this platform")

type unitStopped struct{ err error }

func (u unitStopped) Error() string   { return u.err.Error() }
func (u unitStopped) Unwrap() []error { return []error{u.err, ErrUnitStopped} }

// StopUnit marks err as ending the trial's cell (ErrUnitStopped); its text
// is err's own.
func StopUnit(err error) error {
	if err == nil {
		return nil
	}
	return unitStopped{err}
}
