package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/catalog"
	"github.com/nearnative/nearnative/internal/engine"
	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/vm"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/workload"
	"github.com/nearnative/nearnative/internal/workload/fio"
	"github.com/nearnative/nearnative/studies"
)

func (a *app) studiesCmd() *cobra.Command {
	var noCheck bool
	c := &cobra.Command{
		Use:   "studies [STUDY...]",
		Short: "List the built-in studies: how long each takes here, --quick and in full, what it needs, and why one cannot run",
		Long: `List the built-in studies (or the named ones: built-in names or study files).
Beside each, the duration a run of it would print before its first trial on
this machine, --quick and in full (each workload's own estimate and typical
start-up costs), and what it needs: the CPUs its platforms pin, the free disk
its data files take, KVM for comparable vm rows, a Kubernetes cluster for k8s
rows. Below the table, for each study that cannot run here as it stands, or
whose rows would not be comparable, the reason.

The platform checks are the ones a run makes: the Docker engine and the
workload image, the cluster, and a probe guest booted under QEMU (seconds
with KVM, up to a minute without); --no-check skips them.`,
		Example: `  nearnative studies
  nearnative studies micro web20 --no-check
  nearnative studies my-study.yaml`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeStudies,
		RunE: func(c *cobra.Command, args []string) error {
			var check platformCheck = noPlatformCheck{}
			if !noCheck {
				live := &livePlatforms{a: a, engine: &catalog.Docker{}, cache: map[string]string{}}
				defer live.engine.Close()
				check = live
			}
			return a.listStudies(c.Context(), args, check)
		},
	}
	c.Flags().BoolVar(&noCheck, "no-check", false, "skip the platform checks (Docker, the image, the cluster, the VM probe): estimates and the studies' own needs only")
	c.AddCommand(a.studiesShowCmd())
	return c
}

func (a *app) studiesShowCmd() *cobra.Command {
	var quick bool
	c := &cobra.Command{
		Use:   "show STUDY [--quick]",
		Short: "Print a study's YAML, ready to copy and edit",
		Long: `Print a built-in study's file as it ships, comments included, to copy and
edit; a study file's path prints that file. With --quick, print the study as
--quick runs it instead: the quick block applied, every workload parameter
written out with its --quick value, and the seed left to be chosen at run
time, so that running the printed file is the quick run.`,
		Example: `  nearnative studies show redis > my-redis.yaml
  nearnative studies show micro --quick
  nearnative run my-redis.yaml --rounds 10`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeStudies,
		RunE: func(c *cobra.Command, args []string) error {
			data, err := a.studyYAML(args[0], quick)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(data)
			return err
		},
	}
	c.Flags().BoolVar(&quick, "quick", false, "print the study as --quick runs it")
	return c
}

// studyYAML returns the file of the study nameOrPath as written, or with
// quick the study as --quick runs it.
func (a *app) studyYAML(nameOrPath string, quick bool) ([]byte, error) {
	st, err := study.Load(nameOrPath, a.reg)
	if err != nil {
		return nil, withCode(ExitBadInput, err)
	}
	if quick {
		q, err := st.WithQuick(a.reg)
		if err != nil {
			return nil, withCode(ExitBadInput, err)
		}
		data, err := q.YAML()
		if err != nil {
			return nil, err
		}
		head := fmt.Sprintf("# %s as `nearnative run %s --quick` runs it: the quick block applied, every\n# parameter at its --quick value, the seed chosen at run time.\n", st.Source, nameOrPath)
		return append([]byte(head), data...), nil
	}
	if name, ok := strings.CutPrefix(st.Source, "studies/"); ok && !strings.ContainsAny(nameOrPath, `/\`) {
		data, err := fs.ReadFile(studies.FS, name)
		if err != nil {
			return nil, fmt.Errorf("reading built-in study %s: %w", nameOrPath, err)
		}
		return data, nil
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, withCode(ExitBadInput, fmt.Errorf("reading study: %w", err))
	}
	return data, nil
}

// studyHere is what a run of one study, --quick or in full, would be here.
type studyHere struct {
	// d is the duration the run would print before its first trial; 0
	// when refused.
	d time.Duration
	// refused says why the run cannot start here ("" when it can).
	refused string
	// caveats are platform rows that would fail or not be comparable.
	caveats []string
	needs   needs
}

// needs are what a run asks of the machine beyond Docker and the image.
type needs struct {
	// cores is the CPUs the platforms' cpusets name (the highest + 1).
	cores int
	// disk is the free space the workloads' data files need, per file
	// system: the largest of the workloads'.
	disk []fio.Space
	// kvm: vm rows are comparable only under KVM; cluster: k8s rows need one.
	kvm, cluster bool
}

// platformCheck says why the rows of a study platform cannot run here, or
// would not be comparable: "" when they can.
type platformCheck interface {
	Check(ctx context.Context, p study.Platform, client host.Setting) string
}

// noPlatformCheck checks nothing (--no-check).
type noPlatformCheck struct{}

func (noPlatformCheck) Check(context.Context, study.Platform, host.Setting) string { return "" }

// livePlatforms checks platforms as `nearnative platforms` does and a run
// would: the platform's Checker, the workload image for everything but
// native, and a VM's acceleration (vm.Probe, once per process). Each base
// and option set is checked once.
type livePlatforms struct {
	a      *app
	engine *catalog.Docker
	cache  map[string]string

	imgRef  string
	imgErr  error
	imgDone bool
}

// Check implements platformCheck.
func (l *livePlatforms) Check(ctx context.Context, sp study.Platform, client host.Setting) string {
	key := fmt.Sprintf("%s %+v %+v", sp.Base, sp.Options, client)
	if why, ok := l.cache[key]; ok {
		return why
	}
	why := l.check(ctx, sp, client)
	l.cache[key] = why
	return why
}

func (l *livePlatforms) check(ctx context.Context, sp study.Platform, client host.Setting) string {
	label := rowsLabel(sp.Base)
	if sp.Base != platform.Native && !l.imgDone {
		l.imgDone = true
		l.imgRef, l.imgErr = l.a.imageRef(ctx, l.engine, "")
	}
	err := catalog.Check(ctx, study.Platform{Name: sp.Base, Base: sp.Base, Options: sp.Options}, client, l.imgRef, l.a.dir, l.engine, nil)
	if err == nil && l.imgErr != nil && sp.Base != platform.Native {
		err = l.imgErr
	}
	switch {
	case err != nil:
		return label + ": " + err.Error()
	case isVM(sp.Base):
		if r, err := vm.Probe(ctx); err == nil && r.Emulated() {
			return "VM rows would be emulated (TCG), not comparable: " + r.KVMReason
		}
	}
	return ""
}

func isVM(base string) bool  { return platform.Family(base) == platform.FamilyVM }
func isK8s(base string) bool { return platform.Family(base) == platform.FamilyKubernetes }

// rowsLabel names a platform kind's rows in a reason line.
func rowsLabel(base string) string {
	switch {
	case isVM(base):
		return "VM rows"
	case isK8s(base):
		return "k8s rows"
	case strings.HasPrefix(base, "docker-"):
		return "docker rows"
	}
	return base + " rows"
}

// studyRuns says what runs of the study would be here, --quick and in full.
func (a *app) studyRuns(ctx context.Context, nameOrPath string, check platformCheck) (info study.Info, quick, full studyHere, err error) {
	st, err := study.Load(nameOrPath, a.reg)
	if err != nil {
		return info, quick, full, withCode(ExitBadInput, err)
	}
	info = study.Info{Name: st.Name, Description: st.Description}
	return info, a.here(ctx, st, true, check), a.here(ctx, st, false, check), nil
}

// here says what a run of st would be on this machine: its estimate
// (engine.Expected, the figure a run prints) or why it cannot start, what
// it needs, and the platform rows that would fail or not compare.
func (a *app) here(ctx context.Context, loaded *study.Study, quick bool, check platformCheck) studyHere {
	var h studyHere
	st := *loaded
	err := st.Apply(study.Overrides{Quick: quick}, a.reg)
	if err == nil {
		h.d, err = engine.Expected(&st, a.reg)
	}
	var space *fio.SpaceError
	switch {
	case errors.As(err, &space):
		h.refused = fmt.Sprintf("needs %s free under %s, %s left", gib(space.Need), space.Dir, gib(space.Free))
		h.needs.disk = []fio.Space{{Dir: space.Dir, Need: space.Need, Free: space.Free}}
		// The needs of its platforms still count.
		st = *loaded
		if quick {
			if q, err := loaded.WithQuick(a.reg); err == nil {
				st = *q
			}
		}
	case err != nil:
		h.refused = err.Error()
		return h
	default:
		h.needs.disk = diskNeeds(&st, a.reg)
	}
	seen := map[string]bool{}
	for _, p := range st.Platforms {
		if cpus, err := platform.ParseCPUSet(p.Options.CPUSet); err == nil && len(cpus) > 0 {
			h.needs.cores = max(h.needs.cores, slices.Max(cpus)+1)
		}
		h.needs.kvm = h.needs.kvm || isVM(p.Base)
		h.needs.cluster = h.needs.cluster || isK8s(p.Base)
		if why := check.Check(ctx, p, st.ClientSetting()); why != "" && !seen[why] {
			seen[why] = true
			h.caveats = append(h.caveats, why)
		}
	}
	if n := sysinfo.CPUCount(); h.needs.cores > n && h.refused == "" {
		h.refused = fmt.Sprintf("its platforms pin CPUs up to %d, this machine has %d", h.needs.cores-1, n)
	}
	return h
}

// diskNeeds is the largest free space any of the study's workloads needs
// per file system (fio's data files; the other workloads say nothing).
func diskNeeds(st *study.Study, reg *workload.Registry) []fio.Space {
	var out []fio.Space
	for _, w := range st.Workloads {
		kind, ok := reg.Get(w.Kind)
		if !ok {
			continue
		}
		in, err := kind.New(w.Values)
		if err != nil {
			continue
		}
		if f, ok := in.(*fio.Instance); ok {
			for _, s := range f.Space() {
				i := slices.IndexFunc(out, func(o fio.Space) bool { return o.Dir == s.Dir })
				switch {
				case i < 0:
					out = append(out, s)
				case s.Need > out[i].Need:
					out[i] = s
				}
			}
		}
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
	}
	return out
}

// listStudies prints the table of `nearnative studies` and the reasons
// below it.
func (a *app) listStudies(ctx context.Context, args []string, check platformCheck) error {
	if len(args) == 0 {
		infos, err := study.Builtins()
		if err != nil {
			return err
		}
		for _, i := range infos {
			args = append(args, i.Name)
		}
	}
	if _, ok := check.(*livePlatforms); ok {
		fmt.Fprintln(a.stderr, "checking the platforms the studies use, as a run would (the VM probe boots a guest: seconds with KVM, up to a minute without; --no-check skips this)")
	}
	type row struct {
		name, what  string
		quick, full studyHere
	}
	var rows []row
	for _, name := range args {
		info, q, f, err := a.studyRuns(ctx, name, check)
		if err != nil {
			return err
		}
		rows = append(rows, row{info.Name, info.Description, q, f})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "STUDY\t--QUICK\tFULL\tNEEDS\tWHAT\n")
	var reasons []string
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, durationCell(r.quick), durationCell(r.full), needsCell(r.quick.needs, r.full.needs), r.what)
		reasons = append(reasons, reasonLines(r.name, r.quick, r.full)...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(reasons) > 0 {
		fmt.Fprintf(a.stdout, "\nOn this machine (%d CPUs):\n", sysinfo.CPUCount())
		for _, r := range reasons {
			fmt.Fprintln(a.stdout, "  "+r)
		}
	}
	return nil
}

// reasonLines says why the study's runs cannot start here, or which of
// their rows would fail or not compare: once for both runs when they share
// the reason, else for the run it applies to.
func reasonLines(name string, quick, full studyHere) []string {
	lines := func(h studyHere) []string {
		var out []string
		if h.refused != "" {
			out = append(out, "cannot run here: "+h.refused)
		}
		return append(out, h.caveats...)
	}
	q, f := lines(quick), lines(full)
	var out []string
	for _, l := range f {
		if slices.Contains(q, l) {
			out = append(out, name+": "+l)
		} else {
			out = append(out, name+", full: "+l)
		}
	}
	for _, l := range q {
		if !slices.Contains(f, l) {
			out = append(out, name+", --quick: "+l)
		}
	}
	return out
}

// durationCell is "about 12m0s", with " *" when some of its rows would
// fail or not compare, or "refused *".
func durationCell(h studyHere) string {
	switch {
	case h.refused != "":
		return "refused *"
	case len(h.caveats) > 0:
		return "about " + h.d.Round(time.Minute/6).String() + " *"
	}
	return "about " + h.d.Round(time.Minute/6).String()
}

// needsCell says what the full run needs, and where --quick needs less.
func needsCell(quick, full needs) string {
	var parts []string
	if full.cores > 0 {
		p := plural(full.cores, "core")
		switch {
		case quick.cores == 0:
			p += " (full only)"
		case quick.cores < full.cores:
			p += fmt.Sprintf(" (--quick %d)", quick.cores)
		}
		parts = append(parts, p)
	}
	for _, s := range full.disk {
		p := fmt.Sprintf("%s free under %s", gib(s.Need), s.Dir)
		if i := slices.IndexFunc(quick.disk, func(q fio.Space) bool { return q.Dir == s.Dir }); i >= 0 && quick.disk[i].Need < s.Need {
			p += fmt.Sprintf(" (--quick %s)", gib(quick.disk[i].Need))
		}
		parts = append(parts, p)
	}
	only := func(what string, q bool) string { // what only the full run needs
		if !q {
			return what + " (full only)"
		}
		return what
	}
	if full.kvm {
		parts = append(parts, only("KVM for vm rows", quick.kvm))
	}
	if full.cluster {
		parts = append(parts, only("a cluster for k8s rows", quick.cluster))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// gib writes a byte count as GiB with one decimal (MiB below 1 GiB).
func gib(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// plural is "1 core", "2 cores".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
