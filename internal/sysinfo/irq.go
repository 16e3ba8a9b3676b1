package sysinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IRQ is one device interrupt line: where it may be delivered and where it
// was. The seeds explained scale-out results partly by interrupt placement
// (irqbalance spreading a NIC's interrupts over every core).
type IRQ struct {
	Number int
	Name   string // the device's name for it ("virtio2-input.0", "eth0-TxRx-3")
	// Affinity is smp_affinity_list ("0-1"), "" when unreadable.
	Affinity string
	// Counts are the interrupts served per CPU since boot, in
	// /proc/interrupts column order.
	Counts []uint64
}

// ParseInterrupts reads /proc/interrupts: the numbered device lines with
// their per-CPU counts and name (the architecture's named lines, NMI, LOC
// and the like, are skipped).
func ParseInterrupts(r io.Reader) ([]IRQ, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("/proc/interrupts is empty")
	}
	ncpu := len(strings.Fields(sc.Text()))
	var out []IRQ
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			continue // NMI:, LOC:, ...
		}
		irq := IRQ{Number: n}
		i := 1
		for ; i < len(f) && i <= ncpu; i++ {
			c, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				break
			}
			irq.Counts = append(irq.Counts, c)
		}
		if rest := f[i:]; len(rest) > 0 {
			irq.Name = rest[len(rest)-1]
		}
		out = append(out, irq)
	}
	return out, sc.Err()
}

// DeviceIRQs returns the interrupt lines that have fired, with their
// affinity, read under procRoot ("/proc").
func DeviceIRQs(procRoot string) ([]IRQ, error) {
	f, err := os.Open(filepath.Join(procRoot, "interrupts"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := ParseInterrupts(f)
	if err != nil {
		return nil, err
	}
	var out []IRQ
	for _, irq := range all {
		var sum uint64
		for _, c := range irq.Counts {
			sum += c
		}
		if sum == 0 {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(procRoot, "irq", strconv.Itoa(irq.Number), "smp_affinity_list")); err == nil {
			irq.Affinity = strings.TrimSpace(string(b))
		}
		out = append(out, irq)
	}
	return out, nil
}

// FormatIRQs is the environment record of interrupt placement: one
// "NUMBER NAME -> AFFINITY (served: c0/c1/...)" per line, joined by "; ".
func FormatIRQs(irqs []IRQ) string {
	var parts []string
	for _, irq := range irqs {
		counts := make([]string, len(irq.Counts))
		for i, c := range irq.Counts {
			counts[i] = strconv.FormatUint(c, 10)
		}
		aff := irq.Affinity
		if aff == "" {
			aff = "?"
		}
		parts = append(parts, fmt.Sprintf("%d %s -> CPUs %s (served %s)", irq.Number, irq.Name, aff, strings.Join(counts, "/")))
	}
	return strings.Join(parts, "; ")
}

// IRQBalance says whether irqbalance runs: "running (pid N)" or "not running".
func IRQBalance(procRoot string) string {
	if ps := Procs(procRoot, "irqbalance"); len(ps) > 0 {
		return fmt.Sprintf("running (pid %d)", ps[0].PID)
	}
	return "not running"
}
