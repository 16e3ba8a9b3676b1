package sysinfo

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseInterrupts(t *testing.T) {
	const text = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 38:          0      54456 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:      45709          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
NMI:          0          0   Non-maskable interrupts
LOC:    1234567    7654321   Local timer interrupts
`
	got, err := ParseInterrupts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []IRQ{
		{Number: 24, Name: "ACPI:Ged", Counts: []uint64{1, 0}},
		{Number: 38, Name: "virtio2-input.0", Counts: []uint64{0, 54456}},
		{Number: 39, Name: "virtio2-output.0", Counts: []uint64{45709, 0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	got[1].Affinity = "0-1"
	if s := FormatIRQs(got[1:2]); s != "38 virtio2-input.0 -> CPUs 0-1 (served 0/54456)" {
		t.Errorf("FormatIRQs = %q", s)
	}
}

func TestDeviceIRQsHere(t *testing.T) {
	irqs, err := DeviceIRQs("/proc")
	if err != nil {
		t.Skipf("no /proc/interrupts here: %v", err)
	}
	for _, irq := range irqs {
		var sum uint64
		for _, c := range irq.Counts {
			sum += c
		}
		if sum == 0 {
			t.Errorf("IRQ %d listed though it never fired", irq.Number)
		}
	}
}
