package auction

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	app "github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/internal/driver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
	"github.com/nearnative/nearnative/internal/workload"
)

func TestExpMix(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	users, _ := strconv.Atoi(os.Getenv("EXP_USERS"))
	windows, _ := strconv.Atoi(os.Getenv("EXP_WINDOWS"))
	win, _ := time.ParseDuration(os.Getenv("EXP_WIN"))
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native)
	w := Workload{}
	v, err := workload.Resolve(w.Params(), map[string]string{"max_users": os.Getenv("EXP_MAX"), "app_servers": "1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := w.New(v)
	if err != nil {
		t.Fatal(err)
	}
	in := inst.(*Instance)
	ctx := context.Background()
	tr := workload.Trial{Run: run, Name: "exp", Platform: ps[platform.Native], Host: ps[platform.Native], Duration: win, RawDir: root, Log: testenv.Log{T: t}}
	p, err := in.prepare(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	dataDir, _ := state.TempDir(run, "pgdata")
	defer os.RemoveAll(dataDir)
	uid, gid, _ := app.SystemUser("postgres")
	if err := p.template.CopyTo(dataDir, uid, gid); err != nil {
		t.Fatal(err)
	}
	var res workload.Result
	d, stop, err := workload.Deploy(ctx, tr, in.stack(p.war, dataDir).topology(), &res)
	if err != nil {
		t.Fatal(err)
	}
	var e error
	defer stop(&e)
	addr := d.Entries(RoleWeb, app.PortHTTP)[0]
	defer ReleaseSession("exp")
	for i := 0; i < windows; i++ {
		rampUp := time.Duration(0)
		if i == 0 {
			rampUp = 5 * time.Second
		}
		c := in.driverConfig(users, addr, win, string(run), "exp")
		c.Phases = driver.Phases{RampUp: rampUp, Steady: win}
		r, err := driver.Run(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var tot int64
		for _, o := range r.Ops {
			tot += o.Count + o.Failed()
		}
		var names []string
		for _, o := range Ops {
			if o.Mix > 0 {
				names = append(names, o.Name)
			}
		}
		sort.Slice(names, func(a, b int) bool { return Ops[OpIndex(names[a])].Mix > Ops[OpIndex(names[b])].Mix })
		line := fmt.Sprintf("window %d: %d ops %.1f ops/s cycle %.2fs |", i, tot, r.Throughput(), r.Cycle.MeanAchieved().Seconds())
		for _, n := range names {
			o := r.Ops[n]
			var k int64
			var p99 float64
			if o != nil {
				k = o.Count + o.Failed()
				if o.Count > 0 {
					p99 = o.Latency.Quantile(0.99).Seconds()
				}
			}
			line += fmt.Sprintf(" %s %.1f/%.1f(%.2fs)", n[:min(8, len(n))], 100*float64(k)/float64(tot), Ops[OpIndex(n)].Mix, p99)
		}
		t.Log(line)
		v := Rules(0.1, 3).Evaluate(r.QoS())
		t.Log("  verdict:", v.Summary())
	}
}
