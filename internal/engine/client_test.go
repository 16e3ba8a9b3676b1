package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/host"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// namedHost is a client host that only says where it is.
type namedHost struct {
	host.Host
	where string
}

func (h namedHost) Describe() string { return h.where }
func (h namedHost) Detail() string   { return "test detail" }

// TestClientHostsRecorded: the run stores where each platform's load ran
// (one note per client host, naming its platforms), each trial's record
// says it, and the roles beside the driver are opened once per client host,
// on that host.
func TestClientHostsRecorded(t *testing.T) {
	e := newEnv(t)
	ns := namedHost{Host: host.LoopbackHost(), where: "netns veth MTU 1500"}
	clients := map[string]host.Host{"native": ns, "slow": host.LoopbackHost()}
	cfg := e.config(e.study(t, studyYAML("rounds: 2\nwarmup: 0\n", "wa")), "")
	cfg.Platforms = func(ctx context.Context, env platform.Env, ps []study.Platform) (Opened, error) {
		o, err := e.plats.open(ctx, env, ps)
		o.Clients = clients
		return o, err
	}
	var besides []string
	cfg.Host = func(env platform.Env) (workload.HostPlatform, error) {
		besides = append(besides, env.ClientHost().Describe())
		return fakeHost{&fakePlatform{name: "host"}}, nil
	}
	out, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := e.store.RunNotes(context.Background(), out.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range notes {
		if n.Kind == store.NoteClient {
			got = append(got, n.Subject+": "+n.Text)
		}
	}
	if strings.Join(got, "; ") != "slow: host loopback; native: netns veth MTU 1500" {
		t.Errorf("client notes %q", got)
	}
	for _, tr := range e.trials(t, out.Run.ID) {
		want := "client: host loopback (on this machine)"
		if tr.Platform == "native" {
			want = "client: netns veth MTU 1500 (test detail)"
		}
		if !strings.Contains(strings.Join(tr.Where, "\n"), want) {
			t.Errorf("trial %d/%s where %q lacks %q", tr.Round, tr.Platform, tr.Where, want)
		}
	}
	if len(besides) != 2 {
		t.Errorf("the platform beside the driver was opened for %q, want once per client host", besides)
	}
}

// fakeHost is a host platform that starts servers like fakePlatform and
// refuses jobs and topologies (the engine's tests deploy none).
type fakeHost struct{ *fakePlatform }

func (fakeHost) RunJob(context.Context, string, platform.Spec) (platform.JobResult, error) {
	return platform.JobResult{}, errors.New("fake host: no jobs")
}

func (fakeHost) Machine() topology.Machine { return topology.Machine{} }

func (fakeHost) Open(context.Context, string, *topology.Plan) (deploy.Site, error) {
	return nil, errors.New("fake host: no topologies")
}
