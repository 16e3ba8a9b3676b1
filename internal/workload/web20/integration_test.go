package web20

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/apps/olio/oliotest"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// The integration tests deploy the workload's own topology (its roles,
// data copies and volumes) on real platforms. The data is the test
// binary's 25-user template (oliotest), loaded once.

// deployed is the workload's topology running on one platform.
type deployed struct {
	d     *deploy.Deployment
	base  string
	db    string // the database as the host reaches it
	site  string // instance 0's site on the host
	store string
}

// deployOn copies the template and deploys in's topology on p, stopping and
// removing everything when the test ends.
func deployOn(t *testing.T, ctx context.Context, in *Instance, run runid.ID, p, host platform.Platform, trial string) *deployed {
	t.Helper()
	e := oliotest.Setup(t)
	tr := workload.Trial{Run: run, Name: trial, Platform: p, Host: host.(workload.HostPlatform), Log: testenv.Log{T: t}, RawDir: t.TempDir()}
	data, remove, err := copyData(tr, e.Template, max(in.s.Topology.Instances, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	var res workload.Result
	d, stop, err := workload.Deploy(ctx, tr, in.topology(data), &res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		stop(&err)
		if err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	for _, w := range res.Where {
		t.Log(w)
	}
	return &deployed{d: d, base: "http://" + d.Entries(RoleWeb, olio.PortHTTP)[0], db: d.Entries(RoleDB, olio.PortMySQL)[0],
		site: data[0].Site, store: data[0].Store}
}

// TestEveryOperationDeployed drives every operation once against the real
// stack as the workload deploys it (natively; in Docker with the seed's
// two containers, and with one container per instance) and checks what
// each changed: a person added with a GD thumbnail, an event added with its
// tags, an attendee recorded; and that the shared template was not touched.
func TestEveryOperationDeployed(t *testing.T) {
	e := oliotest.Setup(t)
	cases := []struct{ kind, layout string }{
		{platform.Native, topology.ContainerPerServer},
		{platform.DockerBridge, topology.ContainerPerServer},
		{platform.DockerNAT, topology.ContainerPerInstance},
	}
	run := runid.New()
	ps := testenv.Platforms(t, run, t.TempDir(), platform.Native, platform.DockerBridge, platform.DockerNAT)
	storeBefore := dirCount(t, e.Template.FilesDir())
	for i, c := range cases {
		t.Run(c.kind+"/"+c.layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			in, err := newInstance(t, map[string]string{"users": "25", "instances": "1", "layout": c.layout, "php_children": "4",
				"nginx_workers": "2", "buffer_pool": "128m"}, true)
			if err != nil {
				t.Fatal(err)
			}
			st := deployOn(t, ctx, in, run, ps[c.kind], ps[platform.Native], "ops"+string(rune('a'+i)))
			db, err := olio.OpenDB(st.db)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			count := func(q string, args ...any) int {
				t.Helper()
				var n int
				if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return n
			}
			persons, events, attendees := count("SELECT COUNT(*) FROM person"), count("SELECT COUNT(*) FROM socialevent"), count("SELECT COUNT(*) FROM person_socialevent")

			site, err := NewSite(SiteConfig{Base: st.base, Counts: e.Template.Meta.Counts, Users: 1, AttendChance: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			u := userWith(site, false)
			rec := newCounter()
			for _, op := range Ops {
				if err := u.Run(ctx, rec, op); err != nil {
					t.Errorf("%s: %v", op, err)
				}
			}
			if u.LoggedIn() == "" || u.LastAttended == 0 || u.LastPerson == "" || u.LastEvent == 0 {
				t.Fatalf("after every operation: logged in %q, attended %d, person %q, event %d", u.LoggedIn(), u.LastAttended, u.LastPerson, u.LastEvent)
			}
			if got := count("SELECT COUNT(*) FROM person"); got != persons+1 {
				t.Errorf("%d persons after AddPerson, want %d", got, persons+1)
			}
			if n := count("SELECT COUNT(*) FROM person WHERE username = ? AND imagethumburl <> ''", u.LastPerson); n != 1 {
				t.Errorf("the added person %s: %d rows with a thumbnail", u.LastPerson, n)
			}
			if got := count("SELECT COUNT(*) FROM socialevent"); got != events+1 {
				t.Errorf("%d events after AddEvent, want %d", got, events+1)
			}
			tags := count(`SELECT COUNT(*) FROM socialeventtag_socialevent WHERE socialeventid = ?`, u.LastEvent)
			if tags != len(u.LastEventTags) || tags < 1 || tags > 7 {
				t.Errorf("event %d has %d tags, the driver sent %v", u.LastEvent, tags, u.LastEventTags)
			}
			if got := count("SELECT COUNT(*) FROM person_socialevent"); got != attendees+1 {
				t.Errorf("%d attendees after attending, want %d", got, attendees+1)
			}
			if n := count("SELECT COUNT(*) FROM person_socialevent WHERE socialeventid = ? AND username = ?", u.LastAttended, u.LoggedIn()); n != 1 {
				t.Errorf("attendee %s of event %d: %d rows", u.LoggedIn(), u.LastAttended, n)
			}
			// The uploads are in this trial's site, served with the
			// loaded files from the template's store.
			if _, err := os.Stat(filepath.Join(st.site, "files", "e"+strconv.Itoa(u.LastEvent)+"t.jpg")); err != nil {
				t.Errorf("the added event's thumbnail is not in the trial's site: %v", err)
			}
			u.events = []int{u.LastEvent}
			if err := u.Run(ctx, rec, EventDetail); err != nil {
				t.Errorf("EventDetail of the added event: %v", err)
			}
			if err := st.d.Check(ctx); err != nil {
				t.Errorf("a server died: %v", err)
			}
		})
	}
	if got := dirCount(t, e.Template.FilesDir()); got != storeBefore {
		t.Errorf("the template's file store holds %d files after the trials, %d before", got, storeBefore)
	}
}

// TestTrialRuns runs whole short trials, on native with the users in this
// process and on docker-host with a child driver process: every metric is
// reported, nothing fails, and the closed loop's throughput is users over
// the cycle time.
func TestTrialRuns(t *testing.T) {
	e := oliotest.Setup(t)
	run := runid.New()
	ps := testenv.Platforms(t, run, t.TempDir(), platform.Native, platform.DockerHost)
	for _, c := range []struct {
		kind    string
		drivers string
	}{{platform.Native, "0"}, {platform.DockerHost, "1"}} {
		t.Run(c.kind, func(t *testing.T) {
			if c.drivers != "0" {
				testenv.UseTestDrivers(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			in, err := newInstance(t, map[string]string{"users": "25", "instances": "1", "ramp_up": "3s", "ramp_down": "1s",
				"cycle": "500ms", "php_children": "4", "nginx_workers": "2", "buffer_pool": "128m", "drivers": c.drivers}, true)
			if err != nil {
				t.Fatal(err)
			}
			in.cacheDir = filepath.Dir(e.Template.Dir)
			res, err := in.Run(ctx, workload.Trial{Run: run, Name: "trial-" + c.kind, Round: 2, Platform: ps[c.kind], Host: ps[platform.Native].(workload.HostPlatform),
				Duration: 8 * time.Second, RawDir: filepath.Join(t.TempDir(), "raw"), Log: testenv.Log{T: t}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, m := range in.Metrics() {
				v, ok := res.Values[m.Name]
				if !ok {
					t.Errorf("metric %s missing", m.Name)
				}
				if m.Quantile > 0 && res.Samples[m.Name] < 1 {
					t.Errorf("%s: %d samples", m.Name, res.Samples[m.Name])
				}
				if math.IsNaN(v) && !strings.HasSuffix(m.Name, "_pass") {
					t.Errorf("metric %s is NaN", m.Name)
				}
			}
			// 25 users, cycles of 0.5 s (AddPerson and AddEvent at least 2
			// and 3 s): about 45 operations/s while the site keeps up.
			if got := res.Values[MetricOpsPerSec]; got < 25 || got > 60 {
				t.Errorf("%g operations/s", got)
			}
			if res.Values[MetricFailed] != 0 {
				t.Errorf("%g%% of the operations failed; notes: %v", res.Values[MetricFailed], res.Notes)
			}
			if res.Values[MetricWebCPU] <= 0 || res.Values[MetricDBCPU] <= 0 || res.Values[CPUCost.Metric] <= 0 {
				t.Errorf("CPU: web %g%%, db %g%%, %g ms per operation", res.Values[MetricWebCPU], res.Values[MetricDBCPU], res.Values[CPUCost.Metric])
			}
			joined := strings.Join(res.Commands, "\n")
			if !strings.Contains(joined, "behaviour web20-olio") || (c.drivers == "1") != strings.Contains(joined, "-test.run=^$") {
				t.Errorf("commands:\n%s", joined)
			}
			t.Logf("notes:\n%s", strings.Join(res.Notes, "\n"))
		})
	}
	if left, _ := state.TempDirs(run); len(left) > 0 {
		t.Errorf("the trials left %v", left)
	}
}

// TestMissingExtensionRefused: a PHP-FPM without its extensions is
// refused by its readiness probe at once, naming what is missing, with
// PHP-FPM's log.
func TestMissingExtensionRefused(t *testing.T) {
	e := oliotest.Setup(t)
	run := runid.New()
	ps := testenv.Platforms(t, run, t.TempDir(), platform.Native)
	in, err := newInstance(t, map[string]string{"users": "25", "instances": "1", "php_children": "2", "buffer_pool": "128m"}, true)
	if err != nil {
		t.Fatal(err)
	}
	tr := workload.Trial{Run: run, Name: "noext", Platform: ps[platform.Native], Host: ps[platform.Native].(workload.HostPlatform), Log: testenv.Log{T: t}}
	data, remove, err := copyData(tr, e.Template, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	topo := in.topology(data)
	spec := topo.Roles[1].Spec
	topo.Roles[1].Spec = func(id topology.ServerID, p topology.Peers) (platform.Spec, error) {
		s, err := spec(id, p)
		cmd := s.Command
		s.Command = func(l platform.Listen) []string { return slices.Insert(cmd(l), 1, "-n") } // no php.ini: no extensions
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var res workload.Result
	_, _, err = workload.Deploy(ctx, tr, topo, &res)
	if err == nil {
		t.Fatal("a PHP-FPM without mysqli and gd was deployed")
	}
	for _, want := range []string{"server i0-fpm-0 is not ready", "PHP extension mysqli is not loaded (install php8.2-mysql)", "last log lines"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("the refusal took %v (the probe's answer is final)", d)
	}
}

func dirCount(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
