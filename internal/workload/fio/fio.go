// Package fio is the storage micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere": fio with 4k blocks and direct
// I/O (libaio) on one shared file, random read (8 jobs x iodepth 16), random
// write (8 x 16) or a 70/30 read/write mix (8 x 32), run entirely inside the
// platform as a one-shot job. The file lives on a host directory bind-mounted
// into the platform (storage=volume, as the seed did) or in the container's
// own file system (storage=container, overlay2 under Docker).
package fio

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/workload"
)

// Metric names. Which ones a trial reports depends on the mode: iops always,
// read_iops and write_iops for the mixed mode, the latency percentiles of
// each direction the mode drives.
const (
	MetricIOPS      = "iops"
	MetricReadIOPS  = "read_iops"
	MetricWriteIOPS = "write_iops"
	MetricReadP50   = "read_clat_p50_us"
	MetricReadP99   = "read_clat_p99_us"
	MetricWriteP50  = "write_clat_p50_us"
	MetricWriteP99  = "write_clat_p99_us"
)

// Storage places for the data file.
const (
	// StorageVolume puts the file in a host directory bind-mounted into the
	// platform (natively: the directory itself).
	StorageVolume = "volume"
	// StorageContainer puts the file in the container's own file system
	// (natively: the same as StorageVolume).
	StorageContainer = "container"
)

// VolumePath is where the host directory is mounted inside a container.
const VolumePath = "/fio-data"

// FileName is the name of the data file all jobs share.
const FileName = "fio.dat"

// Mode is one of the seed's I/O patterns.
type Mode struct {
	Name    string
	RW      string // fio --rw
	MixRead int    // fio --rwmixread for mixed modes, else 0
	Jobs    int    // seed's numjobs
	Depth   int    // seed's iodepth
}

// Read says whether the mode reads.
func (m Mode) Read() bool { return m.RW == "randread" || m.RW == "randrw" }

// Write says whether the mode writes.
func (m Mode) Write() bool { return m.RW == "randwrite" || m.RW == "randrw" }

// Modes are the seed's three patterns.
var Modes = []Mode{
	{Name: "randread", RW: "randread", Jobs: 8, Depth: 16},
	{Name: "randwrite", RW: "randwrite", Jobs: 8, Depth: 16},
	{Name: "randrw70", RW: "randrw", MixRead: 70, Jobs: 8, Depth: 32},
}

// ModeByName returns the mode called name.
func ModeByName(name string) (Mode, bool) {
	for _, m := range Modes {
		if m.Name == name {
			return m, true
		}
	}
	return Mode{}, false
}

func modeNames() []string {
	var n []string
	for _, m := range Modes {
		n = append(n, m.Name)
	}
	return n
}

// Config is one fio run's settings.
type Config struct {
	Mode    Mode
	Size    int64 // file size in bytes
	BS      int64 // block size in bytes
	Jobs    int
	Depth   int
	Runtime time.Duration // measured, after the ramp
	Ramp    time.Duration // run but not measured
}

// Args returns the fio command line for file. fio lays the file out (and
// fsyncs it) before any job starts, so layout is outside --runtime; the
// jobs share the file and unlink it when done. Jobs are threads (--thread):
// fio's job processes would each call setsid and so outlive a kill of the
// process group when a trial is cancelled.
func (c Config) Args(file string) []string {
	argv := []string{"fio",
		"--name=" + c.Mode.Name,
		"--filename=" + file,
		"--size=" + fioSize(c.Size),
		"--bs=" + fioSize(c.BS),
		"--direct=1",
		"--ioengine=libaio",
		"--rw=" + c.Mode.RW,
	}
	if c.Mode.MixRead > 0 {
		argv = append(argv, "--rwmixread="+strconv.Itoa(c.Mode.MixRead))
	}
	return append(argv,
		"--numjobs="+strconv.Itoa(c.Jobs),
		"--iodepth="+strconv.Itoa(c.Depth),
		"--thread",
		"--time_based",
		"--runtime="+fioTime(c.Runtime),
		"--ramp_time="+fioTime(c.Ramp),
		"--group_reporting",
		"--percentile_list=50:99",
		"--unlink=1",
		"--output-format=json",
	)
}

// fioSize writes n with fio's 1024-based suffixes where exact.
func fioSize(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n >= u.v && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// fioTime writes d as fio's time value: whole seconds, else milliseconds.
func fioTime(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// Workload is the fio workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return "fio" }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "fio inside the platform: 4k direct random read, write or 70/30 mix (libaio) on a volume or the container's file system; IOPS and completion latency"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "mode", Type: workload.String, Default: "randread", Enum: modeNames(), Help: "randread and randwrite (8 jobs x iodepth 16), randrw70: 70% read (8 x 32), as the seed"},
		{Name: "storage", Type: workload.String, Default: StorageVolume, Enum: []string{StorageVolume, StorageContainer},
			Help: "where the file lives: volume (a host temp dir under $TMPDIR, bind-mounted) or container (the container's own file system, overlay2); natively both are the host dir"},
		{Name: "size", Type: workload.String, Default: "10g", Quick: "128m", Help: "file size, e.g. 1g, 512m; the default is the seed's 10g (--quick: 128m); shared by all jobs"},
		{Name: "bs", Type: workload.String, Default: "4k", Help: "block size, a multiple of 512 (seed: 4k)"},
		{Name: "numjobs", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "fio jobs; 0 = the mode's seed figure (8)"},
		{Name: "iodepth", Type: workload.Int, Default: "0", Min: 0, HasMin: true, Help: "I/Os in flight per job; 0 = the mode's seed figure (16, or 32 for randrw70)"},
		{Name: "runtime", Type: workload.String, Default: "", Help: "measured time after the ramp, e.g. 30s; empty = the study's trial length"},
		{Name: "ramp", Type: workload.Duration, Default: "2s", Quick: "1s", Help: "time fio runs before it starts measuring"},
	}
}

// New implements workload.Workload.
func (Workload) New(v workload.Values) (workload.Instance, error) {
	mode, ok := ModeByName(v.String("mode"))
	if !ok {
		return nil, fmt.Errorf("parameter mode: %q is not one of %s", v.String("mode"), strings.Join(modeNames(), ", "))
	}
	size, err := platform.ParseBytes(v.String("size"))
	if err != nil {
		return nil, fmt.Errorf("parameter size: %w", err)
	}
	bs, err := platform.ParseBytes(v.String("bs"))
	if err != nil {
		return nil, fmt.Errorf("parameter bs: %w", err)
	}
	if bs%512 != 0 {
		return nil, fmt.Errorf("parameter bs: %d bytes is not a multiple of 512, which direct I/O needs", bs)
	}
	if size < 1<<20 || size < 16*bs {
		return nil, fmt.Errorf("parameter size: %s is too small: want at least 1m and 16 blocks", v.String("size"))
	}
	cfg := Config{Mode: mode, Size: size, BS: bs, Jobs: v.Int("numjobs"), Depth: v.Int("iodepth"), Ramp: v.Duration("ramp")}
	if r := v.String("runtime"); r != "" {
		if cfg.Runtime, err = time.ParseDuration(r); err != nil || cfg.Runtime < time.Second {
			return nil, fmt.Errorf("parameter runtime: %q is not a duration of at least 1s (e.g. 30s), or empty for the trial length", r)
		}
	}
	if cfg.Jobs == 0 {
		cfg.Jobs = mode.Jobs
	}
	if cfg.Depth == 0 {
		cfg.Depth = mode.Depth
	}
	return &Instance{cfg: cfg, storage: v.String("storage")}, nil
}

// Instance is a configured fio workload.
type Instance struct {
	cfg     Config // Runtime 0 = the trial length
	storage string
}

// Metrics implements workload.Instance.
func (in *Instance) Metrics() []workload.Metric {
	m := in.cfg.Mode
	ms := []workload.Metric{{Name: MetricIOPS, Unit: "IOPS", HigherIsBetter: true, Help: "I/Os per second over all jobs (read + write) as fio reports them"}}
	if m.Read() && m.Write() {
		ms = append(ms,
			workload.Metric{Name: MetricReadIOPS, Unit: "IOPS", HigherIsBetter: true, Help: "read I/Os per second"},
			workload.Metric{Name: MetricWriteIOPS, Unit: "IOPS", HigherIsBetter: true, Help: "write I/Os per second"})
	}
	if m.Read() {
		ms = append(ms,
			workload.Metric{Name: MetricReadP50, Unit: "us", Help: "median read completion latency (fio clat: submission to completion)"},
			workload.Metric{Name: MetricReadP99, Unit: "us", Help: "99th percentile read completion latency"})
	}
	if m.Write() {
		ms = append(ms,
			workload.Metric{Name: MetricWriteP50, Unit: "us", Help: "median write completion latency (fio clat)"},
			workload.Metric{Name: MetricWriteP99, Unit: "us", Help: "99th percentile write completion latency"})
	}
	return ms
}

// placement says where the data file is as the platform sees it.
type placement struct {
	dir    string // directory of the file, as the job sees it
	inside bool   // the job runs in a container or guest, not on the host
}

// place decides where the file goes for a job started with l: natively in
// the host directory, in a container on the volume or in its own file
// system.
func (in *Instance) place(l platform.Listen, hostDir string) placement {
	if l.Dir != platform.ContainerDir {
		return placement{dir: hostDir}
	}
	if in.storage == StorageVolume {
		return placement{dir: VolumePath, inside: true}
	}
	return placement{dir: platform.ContainerDir, inside: true}
}

// Run implements workload.Instance.
func (in *Instance) Run(ctx context.Context, t workload.Trial) (res workload.Result, err error) {
	jr, ok := t.Platform.(platform.JobRunner)
	if !ok {
		return res, fmt.Errorf("platform %s cannot run a job inside itself, which fio needs", t.Platform.Name())
	}
	cfg := in.cfg
	if cfg.Runtime == 0 {
		cfg.Runtime = t.Duration
	}
	if cfg.Runtime < time.Second {
		return res, fmt.Errorf("fio runtime %v is too short: set a trial length or the runtime parameter of at least 1s", cfg.Runtime)
	}
	hostDir, err := state.TempDir(t.Run, t.Name+"-fio")
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := os.RemoveAll(hostDir); rerr != nil && err == nil {
			err = fmt.Errorf("removing the fio directory: %w", rerr)
		}
	}()
	if in.storage == StorageVolume {
		if err := checkSpace(hostDir, cfg.Size); err != nil {
			return res, err
		}
	}
	base := platform.Spec{Name: "fio"}
	if in.storage == StorageVolume {
		base.Volumes = []platform.Volume{{HostPath: hostDir, Path: VolumePath}}
	}

	// Where the file lives, as the platform sees it (not measured).
	var pl placement
	probe := base
	probe.Name = "fio-fs"
	probe.Command = func(l platform.Listen) []string {
		pl = in.place(l, hostDir)
		return []string{"df", "--output=fstype,source,target", pl.dir}
	}
	pr, perr := jr.RunJob(ctx, t.Name, probe)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	fs := "file system unknown"
	if perr == nil {
		if d, ok := parseDF(pr.Stdout); ok {
			fs = d
		}
	}
	file := path.Join(pl.dir, FileName)
	where := in.describe(pl, hostDir, file, fs)
	res.Where = append(res.Where, where)
	if perr != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("could not tell the file system (%s): %v", strings.Join(pr.Command, " "), perr))
	}

	spec := base
	spec.Command = func(l platform.Listen) []string {
		return cfg.Args(path.Join(in.place(l, hostDir).dir, FileName))
	}
	logf(t.Log, "fio %s on %s: %s file at %s, %v after %v ramp", cfg.Mode.Name, t.Platform.Name(), fioSize(cfg.Size), file, cfg.Runtime, cfg.Ramp)
	jres, jerr := jr.RunJob(ctx, t.Name, spec)
	if len(jres.Command) > 0 {
		res.Commands = append(res.Commands, "job: "+strings.Join(jres.Command, " "))
	}
	if jres.Where != "" {
		res.Where = append([]string{jres.Where}, res.Where...)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	raw, werr := saveRaw(t.RawDir, t.Name, jres)
	if jerr == nil && werr != nil {
		return res, werr
	}
	if err := failure(jres, jerr, raw, in.storage, t.Platform.Name()); err != nil {
		return res, err
	}
	sum, err := Parse(jres.Stdout, cfg.Mode.Read(), cfg.Mode.Write())
	if err != nil {
		return res, fmt.Errorf("fio output: %w: see %s", err, raw)
	}
	res.Values = values(cfg.Mode, sum)
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (fio --version as run on the platform)", sum.Version),
		fmt.Sprintf("fio laid out and fsynced the %s file before the timed run; %v ramp not measured; file removed after the trial", fioSize(cfg.Size), cfg.Ramp),
		where)
	return res, nil
}

// describe says where the data file is, for Result.Where.
func (in *Instance) describe(pl placement, hostDir, file, fs string) string {
	switch {
	case !pl.inside && in.storage == StorageContainer:
		return fmt.Sprintf("fio file %s on the host (%s); natively storage=container is the same as volume", file, fs)
	case !pl.inside:
		return fmt.Sprintf("fio file %s on the host (%s)", file, fs)
	case in.storage == StorageVolume:
		return fmt.Sprintf("fio file on host volume %s, bind-mounted at %s (%s as seen inside)", filepath.Join(hostDir, FileName), file, fs)
	default:
		return fmt.Sprintf("fio file in the platform's own file system at %s (%s)", file, fs)
	}
}

// values turns a summary into the mode's metrics.
func values(m Mode, s Summary) map[string]float64 {
	v := map[string]float64{MetricIOPS: s.TotalIOPS()}
	if s.Read != nil {
		v[MetricReadP50], v[MetricReadP99] = s.Read.P50us, s.Read.P99us
	}
	if s.Write != nil {
		v[MetricWriteP50], v[MetricWriteP99] = s.Write.P50us, s.Write.P99us
	}
	if m.Read() && m.Write() {
		v[MetricReadIOPS], v[MetricWriteIOPS] = s.Read.IOPS, s.Write.IOPS
	}
	return v
}

// failure turns a failed job into an error that points to the raw output
// (raw is "" when the job printed nothing), or returns nil.
func failure(j platform.JobResult, jerr error, raw, storage, plat string) error {
	out := append(append([]byte{}, j.Stdout...), j.Stderr...)
	see := ""
	if raw != "" {
		see = ": see " + raw
	}
	if NoDirectIO(out) {
		hint := "use storage=volume on a disk file system"
		if storage == StorageVolume {
			hint = "point $TMPDIR at a directory on a disk file system (ext4, xfs), not tmpfs"
		}
		return fmt.Errorf("fio on %s: %w (storage=%s); %s%s", plat, ErrNoDirectIO, storage, hint, see)
	}
	if jerr == nil {
		return nil
	}
	if msg := FirstError(out); msg != "" {
		return fmt.Errorf("fio on %s: %w: %s%s", plat, jerr, msg, see)
	}
	if len(out) == 0 && strings.Contains(jerr.Error(), "not found") {
		return fmt.Errorf("fio on %s: %w (is fio installed there? the workload image includes it; natively `make setup`)", plat, jerr)
	}
	return fmt.Errorf("fio on %s: %w%s", plat, jerr, see)
}

// saveRaw writes the job's stdout to <trial>-fio.json and its stderr, when
// there is any, to <trial>-fio.stderr under dir. It returns the JSON's path,
// or "" when the job printed nothing.
func saveRaw(dir, trial string, j platform.JobResult) (string, error) {
	if len(j.Stdout) == 0 && len(j.Stderr) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating raw output dir: %w", err)
	}
	p := filepath.Join(dir, trial+"-fio.json")
	if err := os.WriteFile(p, j.Stdout, 0o644); err != nil {
		return "", fmt.Errorf("saving fio output: %w", err)
	}
	if len(j.Stderr) > 0 {
		if err := os.WriteFile(filepath.Join(dir, trial+"-fio.stderr"), j.Stderr, 0o644); err != nil {
			return "", fmt.Errorf("saving fio output: %w", err)
		}
		p += " (stderr in " + trial + "-fio.stderr)"
	}
	return p, nil
}

// checkSpace fails when dir's file system lacks room for a file of size
// bytes plus a margin.
func checkSpace(dir string, size int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("checking free space under %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if need := size + size/10 + 64<<20; free < need {
		return fmt.Errorf("fio needs %s free under %s, only %s left: lower size or point $TMPDIR elsewhere", fioSize(need), dir, fioSize(free))
	}
	return nil
}

// parseDF reads `df --output=fstype,source,target` output into
// "ext4 /dev/vda mounted at /".
func parseDF(out []byte) (string, bool) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		return "", false
	}
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 3 {
		return "", false
	}
	return fmt.Sprintf("%s %s mounted at %s", f[0], f[1], strings.Join(f[2:], " ")), true
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
