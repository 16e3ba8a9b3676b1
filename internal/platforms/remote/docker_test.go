package remote_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/docker"
	"github.com/nearnative/nearnative/internal/platforms/remote"
	"github.com/nearnative/nearnative/internal/topology"
)

// TestDockerTopologyRefusals: what Docker cannot span over sut hosts is
// refused before any engine is reached.
func TestDockerTopologyRefusals(t *testing.T) {
	a, b := remote.FakeHost{ID: "sut1"}, remote.FakeHost{ID: "sut2"}
	place := func(role string) remote.DockerHost {
		if role == "redis" {
			return b
		}
		return a
	}
	engines := &remote.Engines{Local: func(context.Context) (*docker.Daemon, error) {
		t.Fatal("the local engine was asked for the image")
		return nil, nil
	}}
	perServer := &topology.Plan{Layout: "container-per-server", Servers: []topology.Server{
		{ID: topology.ServerID{Role: "haproxy"}, Group: "host", OnHost: true}, // beside the driver: on no sut host
		{ID: topology.ServerID{Role: "twemproxy"}, Group: "i0-twemproxy"},
		{ID: topology.ServerID{Role: "redis"}, Group: "i0-redis"},
	}}
	perInstance := &topology.Plan{Layout: "container-per-instance", Servers: []topology.Server{
		{ID: topology.ServerID{Role: "twemproxy"}, Group: "i0"},
		{ID: topology.ServerID{Role: "redis"}, Group: "i0"},
	}}
	for _, c := range []struct {
		name, kind string
		plan       *topology.Plan
		want       string
	}{
		{"bridge over two hosts", platform.DockerBridge, perServer, "placed on sut hosts sut1 and sut2, and a container on one host's default bridge"},
		{"crun's bridge over two hosts", platform.DockerCrunBridge, perServer, "placed on sut hosts sut1 and sut2, and a container on one host's default bridge"},
		{"one container over two hosts", platform.DockerNAT, perInstance, "container i0 would hold servers placed on sut hosts sut1 and sut2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := remote.NewDocker(c.kind, c.kind, place, []remote.DockerHost{a, b}, platform.Env{}, platform.Options{}, engines, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m := d.Machine(); len(m.CPUs) != 2 {
				t.Fatalf("Machine() = %+v, want the first sut host's CPUs", m)
			}
			_, err = d.Open(context.Background(), "t1", c.plan)
			if !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want it refused as unavailable: %q", err, c.want)
			}
		})
	}
}

// TestDockerRefusedBeforeTheEngine: a path not offered on a sut host is
// refused before any engine is reached or given the image.
func TestDockerRefusedBeforeTheEngine(t *testing.T) {
	h := remote.FakeHost{ID: "sut1"}
	place := func(string) remote.DockerHost { return h }
	engines := &remote.Engines{Local: func(context.Context) (*docker.Daemon, error) {
		t.Fatal("the local engine was asked for the image")
		return nil, nil
	}}
	_, err := remote.NewDocker(platform.DockerNetwork, "dn", place, []remote.DockerHost{h}, platform.Env{}, platform.Options{}, engines, nil)
	if !errors.Is(err, platform.ErrUnavailable) || !strings.Contains(err.Error(), "not offered on sut host sut1") {
		t.Errorf("docker-network: %v, want it refused naming the host", err)
	}
	for _, kind := range append([]string{platform.DockerRunscNAT, platform.DockerCrunBridge}, docker.RemoteKinds...) {
		if _, err := remote.NewDocker(kind, kind, place, []remote.DockerHost{h}, platform.Env{}, platform.Options{}, engines, nil); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
}
