// Package fio is the storage micro-benchmark after the seed "Docker
// Containers Performance in VMware vSphere" (its Figure 4): fio with 4k
// blocks and direct I/O (libaio) on one shared file, random read (8 jobs x
// iodepth 16), random write (8 x 16) or a 70/30 read/write mix (8 x 32), run
// entirely inside the platform as a one-shot job.
//
// Where the file lives is the storage variant: storage=volume puts it in a
// host directory, bind-mounted into a container (natively: the directory
// itself, the native file system); storage=container puts it in the
// platform's own file system: the container's overlay, or a VM guest's
// virtual disk (VMs have no host volumes).
//
// # File size
//
// The seed used a 10 GB file on a 400 GB SSD with direct I/O so that no
// page cache takes part. Direct I/O keeps the host's page cache out natively
// and in containers, but a VM's virtual disk is a file QEMU reads through
// the host's cache, so the default size (size=auto) is the larger of the
// seed's 10 GiB and 1.1x the host's RAM: the file never fits in the page
// cache. A file larger than the free disk is refused before the study
// starts. Native and volume trials of a run share one host file, laid out
// by the first of them and removed when the run ends; a container's own file
// system and a guest's disk are new for every trial, so those trials lay out
// their own (outside the measured time).
package fio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/sysinfo"
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
	// Keep leaves the file in place for later trials (--unlink=0).
	Keep bool
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
		"--unlink="+map[bool]string{true: "0", false: "1"}[c.Keep],
		"--output-format=json",
	)
}

// AutoSize is the default file size for a host with mem bytes of RAM: the
// larger of the seed's 10 GiB and 1.1x the RAM, in whole GiB, so that the
// file never fits in the page cache.
func AutoSize(mem int64) int64 {
	n := max(SeedSize, mem+mem/10)
	return (n + 1<<30 - 1) / (1 << 30) * (1 << 30)
}

// SeedSize is the seed's file size.
const SeedSize = 10 << 30

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
	return "fio inside the platform: 4k direct random read, write or 70/30 mix (libaio) on a host volume or the platform's own file system (overlay, VM disk); IOPS and completion latency"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "mode", Type: workload.String, Default: "randread", Enum: modeNames(), Help: "randread and randwrite (8 jobs x iodepth 16), randrw70: 70% read (8 x 32), as the seed"},
		{Name: "storage", Type: workload.String, Default: StorageVolume, Enum: []string{StorageVolume, StorageContainer},
			Help: "where the file lives: volume (a host temp dir under $TMPDIR, bind-mounted; not in VMs) or container (the platform's own file system: a container's overlay2, a VM's virtual disk); natively both are the host dir"},
		{Name: "size", Type: workload.String, Default: "auto", Quick: "512m",
			Help: "file size, e.g. 10g, 512m; auto = the larger of the seed's 10g and 1.1x the host's RAM, so that the file never fits in the page cache (--quick: 512m, which does; direct I/O keeps the cache out except below a VM's disk); refused when larger than the free disk"},
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
	mem, err := sysinfo.MemoryBytes()
	if err != nil {
		return nil, err
	}
	var size int64
	if s := v.String("size"); s == "auto" {
		size = AutoSize(mem)
	} else if size, err = platform.ParseBytes(s); err != nil {
		return nil, fmt.Errorf("parameter size: %w (or auto)", err)
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
	in := &Instance{cfg: cfg, storage: v.String("storage"), mem: mem, sizeText: v.String("size")}
	// The host file (native, volume) goes under $TMPDIR and is kept for the
	// whole run; with storage=container each container lays out its own
	// file in Docker's data directory while it exists, so on one file
	// system the two need room together.
	dirs := []string{os.TempDir()}
	if in.storage == StorageContainer {
		dirs = append(dirs, DockerRoot)
	}
	if in.space, err = checkSpace(dirs, cfg.Size, in.sizeText); err != nil {
		return nil, err
	}
	return in, nil
}

// DockerRoot is Docker's default data directory, where a container's own
// file system lives; its free space is checked when it exists.
const DockerRoot = "/var/lib/docker"

// Instance is a configured fio workload.
type Instance struct {
	cfg      Config // Runtime 0 = the trial length
	storage  string
	mem      int64  // the host's RAM
	sizeText string // the size parameter as given ("auto", "10g")
	space    []Space
	runs     []hostKey
}

// RefusePlatform implements workload.PlatformRefuser: under gVisor the
// direct I/O fio asks for does not happen. gVisor's sentry accepts
// O_DIRECT but does not pass it on to the host's file (google/gvisor#3626,
// open in the packaged runsc 20221219): reads and writes go through its own
// page cache, and fio would measure memory rather than the storage path.
func (in *Instance) RefusePlatform(base string, _ platform.Platform) error {
	if platform.Family(base) == platform.FamilyGVisor {
		return errors.New("gVisor accepts O_DIRECT but does not pass it on to the host's file (google/gvisor#3626), so fio's direct I/O would go through gVisor's page cache and measure memory, not storage")
	}
	return nil
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
// the host directory, in a container or guest on the volume or in its own
// file system (the job's directory there: ContainerDir in a container,
// below it in a guest).
func (in *Instance) place(l platform.Listen, hostDir string) placement {
	if l.Dir != platform.ContainerDir && !strings.HasPrefix(l.Dir, platform.ContainerDir+"/") {
		return placement{dir: hostDir}
	}
	if in.storage == StorageVolume {
		return placement{dir: VolumePath, inside: true}
	}
	return placement{dir: l.Dir, inside: true}
}

// hostFiles are the host directories whose data file the native and volume
// trials of a run share, by run and file size; Close removes them.
var hostFiles = struct {
	sync.Mutex
	dirs map[hostKey]*hostFile
}{dirs: map[hostKey]*hostFile{}}

type hostKey struct {
	run  runid.ID
	size int64
}

type hostFile struct {
	dir     string
	laidOut bool // a trial has laid the file out
}

// hostFile returns the run's shared host directory for this file size,
// making it on first use.
func (in *Instance) hostFile(run runid.ID) (*hostFile, error) {
	hostFiles.Lock()
	defer hostFiles.Unlock()
	k := hostKey{run, in.cfg.Size}
	if f, ok := hostFiles.dirs[k]; ok {
		return f, nil
	}
	dir, err := state.TempDir(run, "fio-data")
	if err != nil {
		return nil, err
	}
	f := &hostFile{dir: dir}
	hostFiles.dirs[k] = f
	in.runs = append(in.runs, k)
	return f, nil
}

// Close implements io.Closer: it removes the host files of the runs this
// instance took part in (the engine closes instances when a run ends).
func (in *Instance) Close() error {
	hostFiles.Lock()
	defer hostFiles.Unlock()
	var errs []error
	for _, k := range in.runs {
		if f, ok := hostFiles.dirs[k]; ok {
			if err := os.RemoveAll(f.dir); err != nil {
				errs = append(errs, fmt.Errorf("removing the fio data directory: %w", err))
			}
			delete(hostFiles.dirs, k)
		}
	}
	in.runs = nil
	return errors.Join(errs...)
}

// dfMarker separates df's output from fio's JSON in the job's stdout.
const dfMarker = "==nearnative-fio=="

// jobScript runs df on the file's directory (not measured), then fio.
const jobScript = `df --output=fstype,source,target "$1" 2>&1; echo "` + dfMarker + `"; shift; exec "$@"`

// Estimate implements workload.Estimator: the ramp, the runtime and, when
// the trial lays out its own file, writing it at about 1 GB/s (micro
// --quick on the 2-core development machine, run 20261127-083535-5c62: a
// 1 s ramp and 2 s run took 3.0 s a trial natively, 3.8 s on a volume in a
// container, 5.0 s on the overlay with its 512 MB file).
func (in *Instance) Estimate(trial time.Duration) time.Duration {
	run := in.cfg.Runtime
	if run == 0 {
		run = trial
	}
	d := run + in.cfg.Ramp
	if in.storage == StorageContainer {
		d += time.Duration(float64(in.cfg.Size) / 1e9 * float64(time.Second))
	}
	return d
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
	hf, err := in.hostFile(t.Run)
	if err != nil {
		return res, err
	}
	base := platform.Spec{Name: "fio"}
	if in.storage == StorageVolume {
		base.Volumes = []platform.Volume{{HostPath: hf.dir, Path: VolumePath}}
	}
	var pl placement
	spec := base
	spec.Command = func(l platform.Listen) []string {
		pl = in.place(l, hf.dir)
		c := cfg
		c.Keep = !pl.inside || in.storage == StorageVolume // the shared host file stays
		return append([]string{"sh", "-c", jobScript, "fio-job", pl.dir}, c.Args(path.Join(pl.dir, FileName))...)
	}
	hostFiles.Lock()
	reused := hf.laidOut
	hostFiles.Unlock()
	logf(t.Log, "fio %s on %s: %s file (%s), %v after %v ramp", cfg.Mode.Name, t.Platform.Name(), fioSize(cfg.Size), in.sizeText, cfg.Runtime, cfg.Ramp)
	jres, jerr := jr.RunJob(ctx, t.Name, spec)
	if len(jres.Command) > 0 {
		res.Commands = append(res.Commands, "job: "+strings.Join(jres.Command, " "))
	}
	if jres.Where != "" {
		res.Where = append(res.Where, jres.Where)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	where := in.whereText(&jres, pl, hf.dir)
	res.Where = append(res.Where, where)
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
	shared := !pl.inside || in.storage == StorageVolume
	if shared {
		hostFiles.Lock()
		hf.laidOut = true
		hostFiles.Unlock()
	}
	res.Values = values(cfg.Mode, sum)
	layout := layoutNote(cfg.Size, shared, reused)
	res.Notes = append(res.Notes,
		fmt.Sprintf("%s (fio --version as run on the platform)", sum.Version),
		fmt.Sprintf("%s; %v ramp not measured", layout, cfg.Ramp),
		workload.SizeNote+in.sizeNote(),
		where)
	return res, nil
}

// whereText says where the test file was (the place, the host file, the
// file system the job's df line names) and takes that line out of the
// job's output.
func (in *Instance) whereText(jres *platform.JobResult, pl placement, hostDir string) string {
	df, fioOut := splitDF(jres.Stdout)
	jres.Stdout = fioOut
	fs := "file system unknown"
	if d, ok := parseDF(df); ok {
		fs = d
	}
	return in.describe(pl, hostDir, path.Join(pl.dir, FileName), fs)
}

// layoutNote says how the test file of size bytes came to be: laid out by
// this trial, or reused from an earlier one when the host file is shared.
func layoutNote(size int64, shared, reused bool) string {
	layout := fmt.Sprintf("fio laid out and fsynced the %s file before the timed run", fioSize(size))
	switch {
	case shared && reused:
		layout = fmt.Sprintf("the %s host file laid out by an earlier trial of this run was reused (native and volume trials share it; removed when the run ends)", fioSize(size))
	case shared:
		layout += " (kept for the run's later native and volume trials)"
	default:
		layout += "; removed after the trial"
	}
	return layout
}

// sizeNote says how the file size relates to the page cache.
func (in *Instance) sizeNote() string {
	what := fmt.Sprintf("file size %s (size=%s)", fioSize(in.cfg.Size), in.sizeText)
	ram := fmt.Sprintf("%.1f GiB", float64(in.mem)/(1<<30))
	if in.cfg.Size > in.mem {
		return fmt.Sprintf("%s, larger than the host's %s RAM: it never fits in the page cache", what, ram)
	}
	return fmt.Sprintf("%s fits in the host's %s RAM: direct I/O keeps the page cache out natively and in containers, but a VM's virtual disk may be served from the host's cache (size=auto avoids that)", what, ram)
}

// splitDF separates the job's df output from fio's.
func splitDF(out []byte) (df, fio []byte) {
	s := string(out)
	i := strings.Index(s, dfMarker+"\n")
	if i < 0 {
		return nil, out
	}
	return []byte(s[:i]), []byte(s[i+len(dfMarker)+1:])
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

// ErrNoSpace is wrapped by the refusal of a file larger than the free disk:
// the study is fine, this machine's disk is not big enough for it.
var ErrNoSpace = errors.New("not enough free disk")

// SpaceError is the refusal of a file larger than the free disk; it wraps
// ErrNoSpace. Its text says what to change.
type SpaceError struct {
	// Dir is the first directory checked on the file system that lacks room.
	Dir string
	// Need and Free are the bytes needed there and the bytes left.
	Need, Free int64
	msg        string
}

func (e *SpaceError) Error() string { return e.msg }

// Unwrap returns ErrNoSpace.
func (e *SpaceError) Unwrap() error { return ErrNoSpace }

// Space is the free space an instance needs on one file system: Need bytes
// under Dir, which had Free bytes left when it was made.
type Space struct {
	Dir        string
	Need, Free int64
}

// Space returns the free space the instance's data files need, per file
// system (the sum checkSpace held against the free space when New ran).
func (in *Instance) Space() []Space { return in.space }

// freeBytes is the space left to an unprivileged user on dir's file
// system (a variable: tests of the parameters give it a disk of their own).
var freeBytes = func(dir string) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, err
	}
	return int64(fs.Bavail) * int64(fs.Bsize), nil
}

// checkSpace fails when the file systems of dirs lack room for one file of
// size bytes in each dir, plus a margin per file (a tenth, and 64 MiB),
// saying the largest size that fits. Dirs on one file system need room
// together; a dir that does not exist is not checked. It returns what each
// file system needs.
func checkSpace(dirs []string, size int64, given string) ([]Space, error) {
	type fsys struct {
		dir   string // the first dir on it
		files int64
		free  int64
	}
	var order []*fsys
	byDev := map[uint64]*fsys{}
	for _, dir := range dirs {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, fmt.Errorf("checking free space under %s: %w", dir, err)
		}
		f := byDev[st.Dev]
		if f == nil {
			free, err := freeBytes(dir)
			if err != nil {
				return nil, fmt.Errorf("checking free space under %s: %w", dir, err)
			}
			f = &fsys{dir: dir, free: free}
			byDev[st.Dev] = f
			order = append(order, f)
		}
		f.files++
	}
	var out []Space
	for _, f := range order {
		need := f.files * (size + size/10 + 64<<20)
		out = append(out, Space{Dir: f.dir, Need: need, Free: f.free})
		if f.free < need {
			most := max((f.free/f.files-64<<20)*10/11, 0) / (1 << 20) * (1 << 20)
			if most >= 1<<30 {
				most = most / (1 << 30) * (1 << 30)
			}
			what := fmt.Sprintf("a %s file (size=%s) needs", human(size), given)
			if f.files > 1 {
				what = fmt.Sprintf("a %s file (size=%s) on the host and one in each container's own file system (storage=container), both on this file system, need", human(size), given)
			}
			return nil, &SpaceError{Dir: f.dir, Need: need, Free: f.free,
				msg: fmt.Sprintf("fio: %v: %s %s free under %s, only %s left: set size to at most %s, or point $TMPDIR (Docker's data root for storage=container) at a bigger disk",
					ErrNoSpace, what, human(need), f.dir, human(f.free), fioSize(most))}
		}
	}
	return out, nil
}

// human formats a byte count for messages: GiB with one decimal, or MiB.
func human(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
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
