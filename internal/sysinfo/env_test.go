package sysinfo

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseOSRelease(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{"debian 12", `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
ID=debian
`, "Debian GNU/Linux 12 (bookworm)", false},
		{"no pretty name", "NAME='Alpine Linux'\nVERSION_ID=3.19.1\n", "Alpine Linux 3.19.1", false},
		{"comment and blank", "# hi\n\nPRETTY_NAME=Plain\n", "Plain", false},
		{"empty", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOSRelease(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVirtFromFiles(t *testing.T) {
	tests := []struct {
		name            string
		vendor, product string
		flag            bool
		want            string
	}{
		{"qemu dmi", "QEMU", "Standard PC (i440FX + PIIX, 1996)", true, "qemu"},
		{"vmware", "VMware, Inc.", "VMware Virtual Platform", true, "vmware"},
		{"flag only", "", "", true, "unknown hypervisor (cpuinfo hypervisor flag)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := virtFromFiles(tt.vendor, tt.product, tt.flag, true); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCaptureLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	start := time.Now()
	e, err := Capture(ctx)
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	t.Logf("capture took %v", time.Since(start))
	if e.CPUs != runtime.NumCPU() {
		t.Errorf("CPUs = %d, want %d", e.CPUs, runtime.NumCPU())
	}
	if e.Kernel == "" {
		t.Errorf("empty kernel")
	}
	if e.Hostname == "" || e.OS == "" || e.MemoryBytes <= 0 || e.CgroupVersion == "" || e.NUMANodes < 1 {
		t.Errorf("incomplete capture: %+v", e)
	}
	if len(e.Tools) != len(KnownTools) {
		t.Errorf("%d tools, want %d", len(e.Tools), len(KnownTools))
	}
	if w := e.Extra["warnings"]; w != "" {
		t.Logf("warnings: %s", w)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, key := range []string{`"cpu_model"`, `"numa_nodes"`, `"memory_bytes"`, `"cgroup_version"`, `"nearnative_version"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	if testing.Verbose() {
		t.Logf("%s", b)
	}
}

func TestCaptureCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, err := Capture(ctx)
	if err == nil {
		t.Fatalf("Capture with a cancelled context succeeded")
	}
	if e.Kernel == "" || e.CPUs == 0 {
		t.Errorf("file-based facts missing after cancellation: %+v", e)
	}
}
