package sysinfo

import (
	"encoding/binary"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// statSnippet is /proc/stat from the 2-CPU development machine, shortened.
const statSnippet = `cpu  12413 0 5341 43988 843 0 62 34 0 0
cpu0 5750 0 2398 23148 33 0 11 14 0 0
cpu1 6663 0 2942 20839 810 0 50 20 0 0
intr 1385071 0 9 0 0 0 0 0 0 0 0 0 0 144 0 0 0
ctxt 2649853
btime 1700000000
processes 22700
procs_running 2
procs_blocked 0
softirq 1200034 0 301234 12 40044 0 0 3 500000 0 358741
`

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantErr   bool
		busy      uint64
		total     uint64
		cpus      []int
		ctxt      uint64
		intr      uint64
		softirqs  uint64
		softirqT  uint64
		cpu1Busy  uint64
		cpu1Total uint64
	}{
		{
			name: "debian 12 snippet", in: statSnippet,
			// 12413+0+5341+0+62+34 busy; + 43988 idle + 843 iowait.
			busy: 17850, total: 62681, cpus: []int{0, 1},
			ctxt: 2649853, intr: 1385071, softirqs: 1200034, softirqT: 62,
			cpu1Busy: 6663 + 2942 + 50 + 20, cpu1Total: 6663 + 2942 + 50 + 20 + 20839 + 810,
		},
		{
			name: "old kernel with four columns and an offline CPU",
			in:   "cpu 10 20 30 40\ncpu0 5 10 15 20\ncpu2 5 10 15 20\nctxt 7\n",
			busy: 60, total: 100, cpus: []int{0, 2}, ctxt: 7,
			cpu1Busy: 30, cpu1Total: 50,
		},
		{name: "no aggregate line", in: "cpu0 1 2 3 4\n", wantErr: true},
		{name: "too few columns", in: "cpu 1 2 3\n", wantErr: true},
		{name: "garbage number", in: "cpu 1 2 x 4\n", wantErr: true},
		{name: "bad ctxt", in: "cpu 1 2 3 4\nctxt many\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseStat(strings.NewReader(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseStat succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			if got := s.All.Busy(); got != tt.busy {
				t.Errorf("Busy = %d, want %d", got, tt.busy)
			}
			if got := s.All.Total(); got != tt.total {
				t.Errorf("Total = %d, want %d", got, tt.total)
			}
			if len(s.PerCPU) != len(tt.cpus) || len(s.CPUIDs) != len(tt.cpus) {
				t.Fatalf("got %d per-CPU lines (ids %v), want %v", len(s.PerCPU), s.CPUIDs, tt.cpus)
			}
			for i, id := range tt.cpus {
				if s.CPUIDs[i] != id {
					t.Errorf("CPUIDs[%d] = %d, want %d", i, s.CPUIDs[i], id)
				}
			}
			if got := s.PerCPU[1].Busy(); got != tt.cpu1Busy {
				t.Errorf("PerCPU[1].Busy = %d, want %d", got, tt.cpu1Busy)
			}
			if got := s.PerCPU[1].Total(); got != tt.cpu1Total {
				t.Errorf("PerCPU[1].Total = %d, want %d", got, tt.cpu1Total)
			}
			if s.Ctxt != tt.ctxt || s.Intr != tt.intr || s.SoftIRQs != tt.softirqs {
				t.Errorf("ctxt/intr/softirq = %d/%d/%d, want %d/%d/%d",
					s.Ctxt, s.Intr, s.SoftIRQs, tt.ctxt, tt.intr, tt.softirqs)
			}
			if s.All.SoftIRQ != tt.softirqT {
				t.Errorf("SoftIRQ ticks = %d, want %d", s.All.SoftIRQ, tt.softirqT)
			}
		})
	}
}

func TestParseStatLongIntrLine(t *testing.T) {
	in := "cpu 1 2 3 4\nintr 99" + strings.Repeat(" 0", 100000) + "\nctxt 5\n"
	s, err := ParseStat(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ParseStat: %v", err)
	}
	if s.Intr != 99 || s.Ctxt != 5 {
		t.Errorf("intr/ctxt = %d/%d, want 99/5", s.Intr, s.Ctxt)
	}
}

func TestDelta(t *testing.T) {
	hz := float64(ClockTicks())
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	start := CPUSample{
		At:       t0,
		All:      CPUTimes{User: 1000, System: 500, Idle: 5000, IOWait: 100, SoftIRQ: 50, Steal: 10},
		PerCPU:   []CPUTimes{{User: 600, Idle: 2000}, {User: 400, Idle: 3000}},
		CPUIDs:   []int{0, 1},
		Ctxt:     1000,
		Intr:     2000,
		SoftIRQs: 300,
	}
	end := CPUSample{
		At: t0.Add(2 * time.Second),
		// +100 user, +40 system, +50 idle, +10 softirq; iowait steps back.
		All:      CPUTimes{User: 1100, System: 540, Idle: 5050, IOWait: 99, SoftIRQ: 60, Steal: 10},
		PerCPU:   []CPUTimes{{User: 675, Idle: 2025}, {User: 425, Idle: 3075}, {User: 5}},
		CPUIDs:   []int{0, 1, 2},
		Ctxt:     1500,
		Intr:     2600,
		SoftIRQs: 340,
	}
	tests := []struct {
		name string
		a, b CPUSample
	}{
		{"start.Delta(end)", start, end},
		{"end.Delta(start)", end, start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.a.Delta(tt.b)
			if d.Interval != 2*time.Second {
				t.Errorf("Interval = %v, want 2s", d.Interval)
			}
			checkFloat(t, "BusySeconds", d.BusySeconds, 150/hz)
			checkFloat(t, "TotalSeconds", d.TotalSeconds, 200/hz)
			checkFloat(t, "SoftIRQSeconds", d.SoftIRQSeconds, 10/hz)
			checkFloat(t, "IOWaitSeconds", d.IOWaitSeconds, 0)
			checkFloat(t, "Utilisation", d.Utilisation, 0.75)
			if d.ContextSwitches != 500 || d.Interrupts != 600 || d.SoftIRQs != 40 {
				t.Errorf("ctxt/intr/softirqs = %d/%d/%d, want 500/600/40",
					d.ContextSwitches, d.Interrupts, d.SoftIRQs)
			}
			// CPU 2 came online during the interval and is left out.
			if len(d.PerCPUBusy) != 2 || d.CPUIDs[0] != 0 || d.CPUIDs[1] != 1 {
				t.Fatalf("PerCPUBusy %v for CPUs %v, want two entries for 0 and 1", d.PerCPUBusy, d.CPUIDs)
			}
			checkFloat(t, "PerCPUBusy[0]", d.PerCPUBusy[0], 0.75)
			checkFloat(t, "PerCPUBusy[1]", d.PerCPUBusy[1], 0.25)
			lo, hi := d.Spread()
			checkFloat(t, "Spread low", lo, 0.25)
			checkFloat(t, "Spread high", hi, 0.75)
			checkFloat(t, "CostPerOp(ns)", float64(d.CostPerOp(1500)), 150/hz/1500*1e9)
		})
	}
}

func TestCostPerOpZero(t *testing.T) {
	if got := (CPUDelta{BusySeconds: 1}).CostPerOp(0); got != 0 {
		t.Errorf("CostPerOp(0) = %v, want 0", got)
	}
}

func checkFloat(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %g, want %g", what, got, want)
	}
}

func TestParseAuxvClkTck(t *testing.T) {
	word := func(ws ...uint64) []byte {
		b := make([]byte, 8*len(ws))
		for i, w := range ws {
			binary.NativeEndian.PutUint64(b[8*i:], w)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want int64
		ok   bool
	}{
		{"present", word(33, 0x7fff0000, 16, 0xbfebfbff, 17, 100, 0, 0), 100, true},
		{"250 Hz", word(17, 250, 0, 0), 250, true},
		{"absent", word(33, 1, 0, 0), 0, false},
		{"after terminator", word(0, 0, 17, 100), 0, false},
		{"truncated", word(17)[:8], 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseAuxvClkTck(tt.in, 8)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseAuxvClkTck = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestClockTicksLive(t *testing.T) {
	if hz := ClockTicks(); hz != DefaultClockTicks {
		t.Logf("CLK_TCK = %d (unusual but possible)", hz)
	}
	if got := ticksToDuration(uint64(ClockTicks()) * 3 / 2); got != 1500*time.Millisecond {
		t.Errorf("1.5 s of ticks = %v", got)
	}
}

// spin keeps one CPU busy for about d.
func spin(d time.Duration) uint64 {
	var x uint64
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 10000; i++ {
			x += uint64(i)*x ^ 0x9e3779b97f4a7c15
		}
	}
	return x
}

var sink uint64

func TestReadCPULive(t *testing.T) {
	before, err := ReadCPU()
	if err != nil {
		t.Fatalf("ReadCPU: %v", err)
	}
	sink += spin(300 * time.Millisecond)
	after, err := ReadCPU()
	if err != nil {
		t.Fatalf("ReadCPU: %v", err)
	}
	d := before.Delta(after)
	t.Logf("busy %.2fs of %.2fs over %v, per-CPU %v, softirq %.3fs, %d ctxt, %d intr",
		d.BusySeconds, d.TotalSeconds, d.Interval, d.PerCPUBusy, d.SoftIRQSeconds, d.ContextSwitches, d.Interrupts)
	if d.BusySeconds <= 0 {
		t.Errorf("BusySeconds = %g after spinning, want > 0", d.BusySeconds)
	}
	if d.ContextSwitches == 0 || d.Interrupts == 0 {
		t.Errorf("context switches %d, interrupts %d; want both > 0", d.ContextSwitches, d.Interrupts)
	}
	if len(after.PerCPU) != runtime.NumCPU() && len(after.PerCPU) < CPUCount() {
		t.Errorf("%d per-CPU lines, want at least %d", len(after.PerCPU), CPUCount())
	}
}

func TestSumDeltas(t *testing.T) {
	a := CPUDelta{Interval: time.Second, Ticks: CPUTimes{User: 100, Idle: 100}, BusySeconds: 1, TotalSeconds: 2, StealSeconds: 0.1,
		PerCPUBusy: []float64{0.5, 0.5}, CPUIDs: []int{0, 1}, ContextSwitches: 10}
	b := CPUDelta{Interval: 2 * time.Second, Ticks: CPUTimes{User: 300, Idle: 500}, BusySeconds: 3, TotalSeconds: 8,
		PerCPUBusy: []float64{0.9}, CPUIDs: []int{0}, ContextSwitches: 5}
	for _, tc := range []struct {
		name string
		in   []CPUDelta
		want CPUDelta
	}{
		{"one", []CPUDelta{a}, a},
		{"two machines", []CPUDelta{a, b}, CPUDelta{Interval: 2 * time.Second, Ticks: CPUTimes{User: 400, Idle: 600}, BusySeconds: 4, TotalSeconds: 10,
			StealSeconds: 0.1, Utilisation: 0.4, PerCPUBusy: []float64{0.5, 0.5, 0.9}, CPUIDs: []int{0, 1, 0}, ContextSwitches: 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SumDeltas(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SumDeltas =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
