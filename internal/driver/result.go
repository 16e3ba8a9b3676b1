package driver

import (
	"time"

	"github.com/nearnative/nearnative/internal/qos"
)

// OpResult is one operation's steady-phase record, merged over users,
// shards and driver processes.
type OpResult struct {
	// Count is the successful operations; Latency their latency (from the
	// intended start in the open loop, from the call in the closed loop).
	Count   int64 `json:"count"`
	Latency *Hist `json:"latency"`
	// Service is the open loop's latency from the actual send (wrk2's
	// "uncorrected" figure), for comparison; nil in the closed loop.
	Service *Hist `json:"service,omitempty"`
	// Failures counts failed operations by cause; Examples keeps the first
	// error message of each cause.
	Failures map[string]int64  `json:"failures,omitempty"`
	Examples map[string]string `json:"examples,omitempty"`
	// Unfinished counts operations cut off when the driver stopped; they are
	// neither successes nor failures.
	Unfinished int64 `json:"unfinished,omitempty"`
}

// Failed is the number of failed operations, every cause.
func (o *OpResult) Failed() int64 {
	var n int64
	for _, v := range o.Failures {
		n += v
	}
	return n
}

// Result is what a driver run measured, merged over its processes.
type Result struct {
	Mode      string `json:"mode"`
	Behaviour string `json:"behaviour"`
	Phases    Phases `json:"phases"`
	// Users (closed loop) or Plan and Connections (open loop) as run.
	Users       int    `json:"users,omitempty"`
	Plan        *Plan  `json:"plan,omitempty"`
	Connections int    `json:"connections,omitempty"`
	Drivers     int    `json:"drivers"` // driver processes: 0 means in the calling process
	Pacing      string `json:"pacing,omitempty"`

	Ops map[string]*OpResult `json:"ops"`
	// Counters are the users' own steady-phase counts (Counter).
	Counters map[string]int64 `json:"counters,omitempty"`
	Cycle    CycleStats       `json:"cycle"`
	Open     OpenStats        `json:"open"`
	// Lag is how late the driver woke, behind its plan, for work it had slept
	// until: its own scheduling delay, not the server's.
	Lag    *Hist    `json:"lag"`
	Series []Second `json:"series,omitempty"`

	// SetupFailures counts users that could not be built (a login that
	// failed); they did not run.
	SetupFailures int64  `json:"setup_failures,omitempty"`
	SetupExample  string `json:"setup_example,omitempty"`

	// CPU is the driver's own CPU time (user + system) from the start of the
	// ramp-up to the end, summed over its processes; ProcessCPU is the whole
	// life of child processes (start-up included), equal to CPU in process.
	CPU        time.Duration `json:"cpu"`
	ProcessCPU time.Duration `json:"process_cpu"`
	Wall       time.Duration `json:"wall"`
	// CPUs is how many CPUs the driver processes could run on, summed.
	CPUs int `json:"cpus"`
	// Peak file descriptors of any driver process against its limit, and
	// peak sockets on ephemeral ports against the range.
	FDs       int `json:"fds"`
	FDLimit   int `json:"fd_limit"`
	Ports     int `json:"ports"`
	PortRange int `json:"port_range"`

	// Commands are the child driver processes' command lines.
	Commands []string `json:"commands,omitempty"`
}

func newResult() *Result {
	return &Result{Ops: map[string]*OpResult{}, Counters: map[string]int64{}, Lag: NewHist()}
}

func (r *Result) op(name string) *OpResult {
	o := r.Ops[name]
	if o == nil {
		o = &OpResult{Latency: NewHist(), Failures: map[string]int64{}, Examples: map[string]string{}}
		r.Ops[name] = o
	}
	return o
}

// merge adds another driver process's result into r.
func (r *Result) merge(o *Result) {
	for name, x := range o.Ops {
		m := r.op(name)
		m.Count += x.Count
		m.Unfinished += x.Unfinished
		m.Latency.Merge(x.Latency)
		if x.Service != nil {
			if m.Service == nil {
				m.Service = NewHist()
			}
			m.Service.Merge(x.Service)
		}
		for k, v := range x.Failures {
			m.Failures[k] += v
		}
		for k, v := range x.Examples {
			if _, ok := m.Examples[k]; !ok {
				m.Examples[k] = v
			}
		}
	}
	for k, v := range o.Counters {
		r.Counters[k] += v
	}
	r.Cycle.add(o.Cycle)
	r.Open.add(o.Open)
	r.Lag.Merge(o.Lag)
	r.Series = mergeSeries(r.Series, o.Series)
	r.SetupFailures += o.SetupFailures
	if r.SetupExample == "" {
		r.SetupExample = o.SetupExample
	}
	r.CPU += o.CPU
	r.ProcessCPU += o.ProcessCPU
	r.Wall = max(r.Wall, o.Wall)
	r.CPUs += o.CPUs
	r.FDs, r.FDLimit = max(r.FDs, o.FDs), max(r.FDLimit, o.FDLimit)
	r.Ports, r.PortRange = max(r.Ports, o.Ports), max(r.PortRange, o.PortRange)
}

// Completed is the number of successful operations of every kind.
func (r *Result) Completed() int64 {
	var n int64
	for _, o := range r.Ops {
		n += o.Count
	}
	return n
}

// Failed is the number of failed operations of every kind.
func (r *Result) Failed() int64 {
	var n int64
	for _, o := range r.Ops {
		n += o.Failed()
	}
	return n
}

// Throughput is successful operations per second of the steady phase.
func (r *Result) Throughput() float64 {
	return float64(r.Completed()) / r.Phases.Steady.Seconds()
}

// CPUShare is the driver's CPU time over its wall time (1.0 = one CPU).
func (r *Result) CPUShare() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return r.CPU.Seconds() / r.Wall.Seconds()
}

// QoS returns the result as the QoS rules see it.
func (r *Result) QoS() qos.Input {
	in := qos.Input{Ops: map[string]qos.Op{}, CycleTarget: r.Cycle.MeanTarget(), CycleAchieved: r.Cycle.MeanAchieved(), Due: r.Open.Due}
	for name, o := range r.Ops {
		op := qos.Op{Count: o.Count, Failures: o.Failed()}
		if o.Count > 0 {
			op.Latency = o.Latency
		}
		in.Ops[name] = op
	}
	return in
}

// Ended totals the per-second series: the operations that ended in any
// phase, successful and failed (unfinished ones are not in the series).
// CPU per operation is taken over it, as the CPU is measured over the
// whole run.
func (r *Result) Ended() (ok, failed int64) {
	for _, s := range r.Series {
		for _, o := range s.Ops {
			ok += o.Count
			failed += o.Failures
		}
	}
	return ok, failed
}

// Points is the per-second series as rows.
func (r *Result) Points() []Point { return Points(r.Series) }
