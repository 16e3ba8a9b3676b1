package sysinfo

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

const cpuinfoEPYC = `processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
physical id	: 0
siblings	: 2
core id		: 0
cpu cores	: 2
flags		: fpu vme de pse tsc msr pae sse sse2 ht syscall nx rdrand hypervisor lahf_lm avx2
bogomips	: 5192.26

processor	: 1
vendor_id	: AuthenticAMD
model name	: AMD EPYC
physical id	: 0
flags		: fpu vme de pse tsc msr pae sse sse2 ht syscall nx rdrand hypervisor lahf_lm avx2

`

const cpuinfoTwoSockets = `processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz
physical id	: 0
flags		: fpu vme sse sse2 hypervisorless

processor	: 1
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz
physical id	: 1
flags		: fpu vme sse sse2 hypervisorless
`

const cpuinfoARM = `processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm
CPU implementer	: 0x41
CPU part	: 0xd0c

processor	: 1
BogoMIPS	: 50.00
CPU implementer	: 0x41
`

func TestParseCPUInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want CPUInfo
	}{
		{"amd vm", cpuinfoEPYC, CPUInfo{Model: "AMD EPYC", Vendor: "AuthenticAMD", Logical: 2, Sockets: 1, Hypervisor: true}},
		{"intel two sockets", cpuinfoTwoSockets, CPUInfo{Model: "Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz",
			Vendor: "GenuineIntel", Logical: 2, Sockets: 2}},
		{"arm64 without model name", cpuinfoARM, CPUInfo{Vendor: "0x41", Logical: 2}},
		{"empty", "", CPUInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUInfo(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ParseCPUInfo: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseIDList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"0", []int{0}, false},
		{"0-1\n", []int{0, 1}, false},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"", nil, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"0-x", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseIDList(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseIDList(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseIDList(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{"debian", "MemTotal:       24684084 kB\nMemFree:        20000000 kB\n", 24684084 * 1024, false},
		{"not first", "Foo: 1 kB\nMemTotal: 2048 kB\n", 2048 * 1024, false},
		{"missing", "MemFree: 1 kB\n", 0, true},
		{"garbage", "MemTotal: lots kB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMemTotal(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

const (
	mountRoot        = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
	mountTmpfs       = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	mountCPU         = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	mountMemory      = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
	mountUnified     = "30 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:6 - cgroup2 cgroup2 rw,nsdelegate\n"
	mountV2Root      = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	mountV2Elsewhere = "40 27 0:40 / /mnt/my\\040cgroup rw - cgroup2 none rw\n"
)

func TestParseCgroupVersion(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{"v1 only", mountRoot + mountTmpfs + mountCPU + mountMemory, CgroupV1, false},
		{"hybrid (this machine)", mountRoot + mountTmpfs + mountCPU + mountMemory + mountUnified, CgroupHybrid, false},
		{"pure v2", mountRoot + mountV2Root, CgroupV2, false},
		{"v2 at root beats a stray v1 hierarchy", mountRoot + mountV2Root + mountCPU, CgroupV2, false},
		{"v2 elsewhere only", mountRoot + mountV2Elsewhere, CgroupV2, false},
		{"none", mountRoot, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCgroupVersion(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := map[string]string{
		`/plain`:            "/plain",
		`/mnt/my\040cgroup`: "/mnt/my cgroup",
		`/tab\011x\134y`:    "/tab\tx\\y",
		`/trailing\04`:      `/trailing\04`,
	}
	for in, want := range tests {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHostHelpersLive(t *testing.T) {
	if got := CPUCount(); got != runtime.NumCPU() {
		t.Errorf("CPUCount = %d, runtime.NumCPU = %d", got, runtime.NumCPU())
	}
	if n, err := NUMANodes(); err != nil || n < 1 {
		t.Errorf("NUMANodes = %d, %v", n, err)
	}
	if n, err := MemoryBytes(); err != nil || n < 64<<20 {
		t.Errorf("MemoryBytes = %d, %v", n, err)
	}
	if n, err := Sockets(); err != nil || n < 1 {
		t.Errorf("Sockets = %d, %v", n, err)
	}
	v, err := CgroupVersion()
	if err != nil {
		t.Fatalf("CgroupVersion: %v", err)
	}
	switch v {
	case CgroupV1, CgroupV2, CgroupHybrid:
		t.Logf("cgroups: %s", v)
	default:
		t.Errorf("CgroupVersion = %q", v)
	}
}

func TestParseEphemeralPorts(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"32768\t60999\n", 32768, 60999, true},
		{"1024 65535", 1024, 65535, true},
		{"32768", 0, 0, false},
		{"a b", 0, 0, false},
		{"60999 32768", 0, 0, false},
		{"0 100", 0, 0, false},
		{"1 70000", 0, 0, false},
	} {
		lo, hi, err := ParseEphemeralPorts(c.in)
		if (err == nil) != c.ok || lo != c.lo || hi != c.hi {
			t.Errorf("ParseEphemeralPorts(%q) = %d, %d, %v; want %d, %d, ok=%v", c.in, lo, hi, err, c.lo, c.hi, c.ok)
		}
	}
}
