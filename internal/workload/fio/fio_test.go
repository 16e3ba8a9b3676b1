package fio

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
)

func TestArgs(t *testing.T) {
	mixed, _ := ModeByName("randrw70")
	cfg := Config{Mode: mixed, Size: 1 << 30, BS: 4096, Jobs: 8, Depth: 32, Runtime: 30 * time.Second, Ramp: 1500 * time.Millisecond}
	want := []string{"fio", "--name=randrw70", "--filename=/fio-data/fio.dat", "--size=1g", "--bs=4k", "--direct=1",
		"--ioengine=libaio", "--rw=randrw", "--rwmixread=70", "--numjobs=8", "--iodepth=32", "--thread", "--time_based",
		"--runtime=30s", "--ramp_time=1500ms", "--group_reporting", "--percentile_list=50:99", "--unlink=1",
		"--output-format=json"}
	if got := cfg.Args("/fio-data/fio.dat"); !slices.Equal(got, want) {
		t.Errorf("Args:\n got %q\nwant %q", got, want)
	}
	read, _ := ModeByName("randread")
	got := Config{Mode: read, Size: 128 << 20, BS: 512, Jobs: 8, Depth: 16, Runtime: time.Second, Ramp: time.Second}.Args("/f")
	for _, a := range got {
		if strings.HasPrefix(a, "--rwmixread") {
			t.Errorf("randread has %s", a)
		}
	}
	for _, a := range []string{"--size=128m", "--bs=512", "--rw=randread", "--iodepth=16"} {
		if !slices.Contains(got, a) {
			t.Errorf("randread args %q lack %s", got, a)
		}
	}
}

func TestFioSizeTime(t *testing.T) {
	sizes := []struct {
		n    int64
		want string
	}{{512, "512"}, {4096, "4k"}, {6144, "6k"}, {1 << 20, "1m"}, {3 << 29, "1536m"}, {10 << 30, "10g"}, {1<<30 + 1, "1073741825"}}
	for _, tc := range sizes {
		if got := fioSize(tc.n); got != tc.want {
			t.Errorf("fioSize(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	times := []struct {
		d    time.Duration
		want string
	}{{time.Second, "1s"}, {2 * time.Minute, "120s"}, {1500 * time.Millisecond, "1500ms"}}
	for _, tc := range times {
		if got := fioTime(tc.d); got != tc.want {
			t.Errorf("fioTime(%v) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

func TestNew(t *testing.T) {
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		t.Fatal(err)
	}
	// A disk of 100 TiB free, whatever this machine's: the cases check
	// the parameters (TestCheckSpace the free-space rule); "beyond the
	// disk" asks for more.
	real := freeBytes
	freeBytes = func(string) (int64, error) { return 100 << 40, nil }
	t.Cleanup(func() { freeBytes = real })
	auto := AutoSize(mem)
	tests := []struct {
		name      string
		over      map[string]string
		quick     bool
		wantErr   string
		wantJobs  int
		wantDepth int
		wantSize  int64
		metrics   []string
	}{
		{name: "defaults", wantJobs: 8, wantDepth: 16, wantSize: auto,
			metrics: []string{MetricIOPS, MetricReadP50, MetricReadP99}},
		{name: "quick", quick: true, wantJobs: 8, wantDepth: 16, wantSize: 512 << 20,
			metrics: []string{MetricIOPS, MetricReadP50, MetricReadP99}},
		{name: "write", over: map[string]string{"mode": "randwrite"}, wantJobs: 8, wantDepth: 16, wantSize: auto,
			metrics: []string{MetricIOPS, MetricWriteP50, MetricWriteP99}},
		{name: "mixed", over: map[string]string{"mode": "randrw70", "size": "10g"}, wantJobs: 8, wantDepth: 32, wantSize: 10 << 30,
			metrics: []string{MetricIOPS, MetricReadIOPS, MetricWriteIOPS, MetricReadP50, MetricReadP99, MetricWriteP50, MetricWriteP99}},
		{name: "overrides", over: map[string]string{"numjobs": "2", "iodepth": "4", "runtime": "3s", "size": "1g"}, wantJobs: 2, wantDepth: 4, wantSize: 1 << 30,
			metrics: []string{MetricIOPS, MetricReadP50, MetricReadP99}},
		{name: "bad size", over: map[string]string{"size": "lots"}, wantErr: "parameter size"},
		{name: "beyond the disk", over: map[string]string{"size": "500t"}, wantErr: "set size to at most"},
		{name: "beyond the disk, overlay", over: map[string]string{"size": "500t", "storage": "container"}, wantErr: "size=500t"},
		{name: "tiny size", over: map[string]string{"size": "64k"}, wantErr: "too small"},
		{name: "bs not sector", over: map[string]string{"bs": "1000"}, wantErr: "multiple of 512"},
		{name: "runtime garbage", over: map[string]string{"runtime": "soon"}, wantErr: "parameter runtime"},
		{name: "runtime short", over: map[string]string{"runtime": "500ms"}, wantErr: "at least 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := workload.Resolve(Workload{}.Params(), tc.over, tc.quick)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := Workload{}.New(v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := inst.(*Instance)
			defer in.Close()
			if in.cfg.Jobs != tc.wantJobs || in.cfg.Depth != tc.wantDepth || in.cfg.Size != tc.wantSize {
				t.Errorf("jobs %d depth %d size %d, want %d %d %d", in.cfg.Jobs, in.cfg.Depth, in.cfg.Size, tc.wantJobs, tc.wantDepth, tc.wantSize)
			}
			var names []string
			for _, m := range inst.Metrics() {
				names = append(names, m.Name)
				if m.HigherIsBetter != strings.HasSuffix(m.Name, "iops") {
					t.Errorf("metric %s: HigherIsBetter %v", m.Name, m.HigherIsBetter)
				}
			}
			if !slices.Equal(names, tc.metrics) {
				t.Errorf("metrics %v, want %v", names, tc.metrics)
			}
		})
	}
}

func TestAutoSize(t *testing.T) {
	tests := []struct{ mem, want int64 }{
		{2 << 30, 10 << 30},    // small host: the seed's 10 GiB
		{9 << 30, 10 << 30},    // 1.1 x 9 GiB = 9.9 GiB: still the seed's
		{24 << 30, 27 << 30},   // this machine: 26.4 GiB, whole GiB up
		{512 << 30, 564 << 30}, // the seed's host: 563.2 GiB -> 564
	}
	for _, tc := range tests {
		got := AutoSize(tc.mem)
		if got != tc.want {
			t.Errorf("AutoSize(%d MiB) = %d MiB, want %d MiB", tc.mem>>20, got>>20, tc.want>>20)
		}
		if got <= tc.mem || got%(1<<30) != 0 {
			t.Errorf("AutoSize(%d) = %d: not above the RAM in whole GiB", tc.mem, got)
		}
	}
}

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	// A size that fits once but not twice: one dir passes, two dirs on the
	// same file system (the host file and a container's) are refused.
	half := free * 10 / 11 * 2 / 3 / (1 << 20) * (1 << 20)
	for _, tc := range []struct {
		name  string
		dirs  []string
		size  int64
		given string
		want  []string // in the error; nil: no error
	}{
		{"small", []string{dir}, 1 << 20, "1m", nil},
		{"too big", []string{dir}, 1 << 60, "auto", []string{"size=auto", "set size to at most"}},
		{"missing dir", []string{filepath.Join(dir, "missing")}, 1 << 60, "auto", nil},
		{"fits once", []string{dir}, half, "x", nil},
		{"not twice", []string{dir, filepath.Join(dir, ".")}, half, "x", []string{"one in each container's own file system", "set size to at most"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			space, err := checkSpace(tc.dirs, tc.size, tc.given)
			if tc.want == nil {
				if err != nil {
					t.Errorf("%v", err)
				}
				// What it needs is said also when it fits: one file
				// system, the file and its margin.
				if tc.name != "missing dir" && (len(space) != 1 || space[0].Need < tc.size || space[0].Free < space[0].Need) {
					t.Errorf("space %+v for a %d-byte file", space, tc.size)
				}
				return
			}
			var se *SpaceError
			if !errors.Is(err, ErrNoSpace) || !errors.As(err, &se) {
				t.Fatalf("got %v, want ErrNoSpace", err)
			}
			if se.Need <= se.Free || se.Dir != dir {
				t.Errorf("%+v: want the need above the free space, under %s", se, dir)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: no %q", err, w)
				}
			}
		})
	}
}

func TestSplitDF(t *testing.T) {
	df, rest := splitDF([]byte("Type Filesystem Mounted on\next4 /dev/vda /x\n" + dfMarker + "\n{\"fio\": 1}\n"))
	if d, ok := parseDF(df); !ok || d != "ext4 /dev/vda mounted at /x" || string(rest) != "{\"fio\": 1}\n" {
		t.Errorf("split: %q %q", df, rest)
	}
	if df, rest := splitDF([]byte("{}")); df != nil || string(rest) != "{}" {
		t.Errorf("no marker: %q %q", df, rest)
	}
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseGolden(t *testing.T) {
	tests := []struct {
		file              string
		wantRead, wantWri bool
	}{
		{"randread.json", true, false},
		{"randwrite.json", false, true},
		{"randrw70.json", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Parse(golden(t, tc.file), tc.wantRead, tc.wantWri)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != "fio-3.33" {
				t.Errorf("version %q", s.Version)
			}
			for _, d := range []struct {
				want bool
				got  *Direction
			}{{tc.wantRead, s.Read}, {tc.wantWri, s.Write}} {
				if (d.got != nil) != d.want {
					t.Fatalf("direction present %v, want %v", d.got != nil, d.want)
				}
				if d.got == nil {
					continue
				}
				if d.got.IOPS < 10 || d.got.IOPS > 1e7 || d.got.TotalIOs <= 0 || d.got.RuntimeMs < 900 {
					t.Errorf("implausible %+v", *d.got)
				}
				if !(d.got.P50us > 0 && d.got.P50us <= d.got.P99us && d.got.P99us < 1e6) {
					t.Errorf("latencies p50 %v p99 %v us", d.got.P50us, d.got.P99us)
				}
			}
			if s.TotalIOPS() <= 0 {
				t.Errorf("total IOPS %v", s.TotalIOPS())
			}
		})
	}
	// Exact values from the mixed golden file (clat_ns 2441216 -> 2441.216 us).
	s, err := Parse(golden(t, "randrw70.json"), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Read.IOPS != 25021.484375 || s.Write.IOPS != 10736.328125 || s.Read.P50us != 2441.216 || s.Write.P99us != 81264.64 {
		t.Errorf("mixed summary read %+v write %+v", *s.Read, *s.Write)
	}
	v := values(Modes[2], s)
	if v[MetricIOPS] != s.Read.IOPS+s.Write.IOPS || v[MetricReadIOPS] != s.Read.IOPS || v[MetricWriteP50] != s.Write.P50us {
		t.Errorf("values %v", v)
	}
}

func TestParseBad(t *testing.T) {
	read := golden(t, "randread.json")
	tests := []struct {
		name    string
		out     []byte
		read    bool
		write   bool
		wantErr string
	}{
		{"empty", nil, true, false, "no JSON"},
		{"garbage", []byte("fio: unrecognized option '--bogus'\nusage: fio ...\n"), true, false, "no JSON"},
		{"not json", []byte("{ this is not json }"), true, false, "does not parse"},
		{"truncated", read[:len(read)/2], true, false, "does not parse"},
		{"not fio", []byte(`{"jobs": []}`), true, false, "fio version"},
		{"no jobs", []byte(`{"fio version": "fio-3.33", "jobs": []}`), true, false, "one job group"},
		{"error json", golden(t, "error.json"), false, true, "error 28"},
		{"wrong direction", read, false, true, "no write I/O"},
		{"no percentiles", []byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "read": {"iops": 5, "total_ios": 5}}]}`), true, false, "percentiles"},
		{"no section", []byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "x"}]}`), true, false, "no read section"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.out, tc.read, tc.write)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestFailure(t *testing.T) {
	jobErr := errors.New("job fio exited with code 1")
	noDirect := "fio: looks like your file system does not support direct=1/buffered=0\nfio: destination does not support O_DIRECT\nfio: pid=15, err=22/file:filesetup.c:805, func=open(/nearnative/fio.dat), error=Invalid argument\n"
	tests := []struct {
		name    string
		job     platform.JobResult
		err     error
		raw     string
		storage string
		want    []string // substrings; nil = no error
	}{
		{"ok", platform.JobResult{Stdout: []byte("{}")}, nil, "r.json", StorageVolume, nil},
		{"no O_DIRECT in container", platform.JobResult{Stderr: []byte(noDirect), ExitCode: 1}, jobErr, "r.json", StorageContainer,
			[]string{"O_DIRECT", "storage=volume", "see r.json"}},
		{"no O_DIRECT on volume", platform.JobResult{Stderr: []byte(noDirect), ExitCode: 1}, jobErr, "r.json", StorageVolume,
			[]string{"O_DIRECT", "TMPDIR"}},
		{"exit with fio error line", platform.JobResult{Stdout: golden(t, "error.json"), ExitCode: 1}, jobErr, "r.json", StorageVolume,
			[]string{"exited with code 1", "No space left on device", "see r.json"}},
		{"missing tool", platform.JobResult{}, errors.New("job fio: fio not found: install it with `make setup`"), "", StorageVolume,
			[]string{"not found", "make setup"}},
		{"other", platform.JobResult{Stdout: []byte("x")}, jobErr, "r.json", StorageVolume, []string{"exited", "see r.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := failure(tc.job, tc.err, tc.raw, tc.storage, "docker-host")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if errors.Is(err, ErrNoDirectIO) != strings.Contains(tc.name, "O_DIRECT") {
				t.Errorf("errors.Is(ErrNoDirectIO) wrong for %v", err)
			}
			if tc.err != nil && !strings.Contains(tc.name, "O_DIRECT") && !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap %v", err, tc.err)
			}
		})
	}
}

func TestPlaceAndDescribe(t *testing.T) {
	host := platform.Listen{Dir: "/tmp/nn-x-job"}
	ctr := platform.Listen{Dir: platform.ContainerDir}
	tests := []struct {
		storage string
		l       platform.Listen
		wantDir string
		inside  bool
		desc    string
	}{
		{StorageVolume, host, "/tmp/vol", false, "on the host"},
		{StorageContainer, host, "/tmp/vol", false, "same as volume"},
		{StorageVolume, ctr, VolumePath, true, "host volume /tmp/vol/fio.dat, bind-mounted at /fio-data/fio.dat"},
		{StorageContainer, ctr, platform.ContainerDir, true, "own file system at /nearnative/fio.dat"},
		// A guest's job directory is below ContainerDir, on its virtual disk.
		{StorageContainer, platform.Listen{Dir: platform.ContainerDir + "/fio"}, platform.ContainerDir + "/fio", true, "own file system at /nearnative/fio/fio.dat"},
	}
	for _, tc := range tests {
		in := &Instance{storage: tc.storage}
		pl := in.place(tc.l, "/tmp/vol")
		if pl.dir != tc.wantDir || pl.inside != tc.inside {
			t.Errorf("%s in %s: placed %+v", tc.storage, tc.l.Dir, pl)
		}
		if d := in.describe(pl, "/tmp/vol", pl.dir+"/"+FileName, "ext4"); !strings.Contains(d, tc.desc) || !strings.Contains(d, "ext4") {
			t.Errorf("describe = %q, want %q", d, tc.desc)
		}
	}
}

func TestParseDF(t *testing.T) {
	tests := []struct {
		out, want string
		ok        bool
	}{
		{"Type    Filesystem     Mounted on\noverlay overlay        /\n", "overlay overlay mounted at /", true},
		{"Type Filesystem Mounted on\next4 /dev/vda /fio-data\n", "ext4 /dev/vda mounted at /fio-data", true},
		{"df: /x: No such file or directory\n", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := parseDF([]byte(tc.out))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseDF(%q) = %q %v, want %q %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNoDirectIOAndFirstError(t *testing.T) {
	if !NoDirectIO([]byte("fio: destination does not support O_DIRECT")) || NoDirectIO(golden(t, "error.json")) {
		t.Error("NoDirectIO misclassifies")
	}
	if got := FirstError(golden(t, "error.json")); !strings.Contains(got, "No space left on device") {
		t.Errorf("FirstError = %q", got)
	}
	if got := FirstError(golden(t, "randread.json")); got != "" {
		t.Errorf("FirstError of a good run = %q", got)
	}
}

func TestRefusesGVisor(t *testing.T) {
	in := &Instance{}
	for _, base := range []string{platform.Native, platform.DockerBridge, platform.DockerCrunBridge, platform.Podman, platform.LXC} {
		if err := in.RefusePlatform(base, nil); err != nil {
			t.Errorf("%s refused: %v", base, err)
		}
	}
	for _, base := range []string{platform.DockerRunscBridge, platform.DockerRunscHost} {
		if err := in.RefusePlatform(base, nil); err == nil || !strings.Contains(err.Error(), "O_DIRECT") {
			t.Errorf("%s: %v, want a refusal naming O_DIRECT", base, err)
		}
	}
}
