package docker

import (
	"context"
	"fmt"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// userNetwork is the user-defined bridge network a DockerNetwork platform
// makes on first use and removes on Close. Docker chooses its subnet from its
// address pools; containers on it resolve each other by name.
type userNetwork struct {
	mu   sync.Mutex
	name string
	id   string
}

// networkName is the name of the user-defined network of platform name in run.
func networkName(run runid.ID, platformName string) string {
	return unsafeName.ReplaceAllString(runid.Prefix+string(run)+"-"+platformName, "_")
}

// ensureNetwork creates the platform's network on first use (kind
// DockerNetwork only), labelled with the run so that RemoveRun finds it.
func (p *dockerPlatform) ensureNetwork(ctx context.Context) error {
	if p.kind != platform.DockerNetwork {
		return nil
	}
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.id != "" {
		return nil
	}
	name := networkName(p.env.Run, p.name)
	resp, err := p.eng.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver: "bridge",
		Labels: map[string]string{runid.Label: string(p.env.Run), runid.LabelRole: "icc", LabelPlatform: p.name},
	})
	if err != nil {
		return fmt.Errorf("%s: creating network %s: %w", p.name, name, err)
	}
	p.net.name, p.net.id = name, resp.ID
	// Its subnet is routed from the client host (a client outside the
	// network reaches a container at its address on it).
	n, err := p.eng.cli.NetworkInspect(ctx, resp.ID, network.InspectOptions{})
	if err != nil {
		return fmt.Errorf("%s: inspecting network %s: %w", p.name, name, err)
	}
	if err := routeTo(ctx, p.client(), n); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// networkIP is the container's address on the platform's own network.
func (p *dockerPlatform) networkIP(insp container.InspectResponse) string {
	if insp.NetworkSettings == nil {
		return ""
	}
	if n, ok := insp.NetworkSettings.Networks[p.net.name]; ok && n != nil {
		return n.IPAddress
	}
	return ""
}

// Close removes the network a DockerNetwork platform made; containers still
// attached are the run's and go first. Other kinds hold nothing.
func (p *dockerPlatform) Close() error {
	p.mu.Lock()
	unroute := p.unroute
	p.unroute, p.routed = nil, false
	p.mu.Unlock()
	uctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	err := unroute.run(uctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if p.kind != platform.DockerNetwork {
		return nil
	}
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	if err := p.eng.cli.NetworkRemove(ctx, p.net.id); err != nil && !gone(err) {
		return fmt.Errorf("%s: removing network %s: %w", p.name, p.net.name, err)
	}
	p.net.id = ""
	return nil
}
