package podman

import (
	"context"
	"errors"
	"os/exec"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
)

// Sweeper finds and removes the containers a crashed run left in Podman's
// storage, rootful or the rootless user's, by their nearnative.run label.
// Each call starts a Podman service of its own (labelled with a fresh ID,
// stopped before the call returns). On a machine without Podman, or
// without the rootless user, there is nothing to sweep.
type Sweeper struct{ Rootless bool }

// Kind implements cleanup.Sweeper.
func (s Sweeper) Kind() string {
	if s.Rootless {
		return "rootless Podman containers"
	}
	return "Podman containers"
}

// with runs f with a service of its own, or returns nil when there is no
// Podman (or rootless user) to ask.
func (s Sweeper) with(ctx context.Context, f func(svc *Service) error) error {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil
	}
	if s.Rootless {
		if _, _, _, err := rootlessUser(); err != nil {
			return nil
		}
	}
	svc, err := StartService(ctx, runid.New(), s.Rootless)
	if errors.Is(err, platform.ErrUnavailable) {
		return nil
	}
	if err != nil {
		return err
	}
	defer svc.Close()
	return f(svc)
}

// Runs implements cleanup.Sweeper.
func (s Sweeper) Runs(ctx context.Context) (ids []runid.ID, err error) {
	err = s.with(ctx, func(svc *Service) error {
		ids, err = svc.Engine().Runs(ctx)
		return err
	})
	return ids, err
}

// Remove implements cleanup.Sweeper.
func (s Sweeper) Remove(ctx context.Context, run runid.ID) (removed []string, err error) {
	err = s.with(ctx, func(svc *Service) error {
		removed, err = svc.Engine().RemoveRun(ctx, run)
		return err
	})
	for i := range removed {
		removed[i] = s.Kind()[:len(s.Kind())-len("containers")] + removed[i]
	}
	return removed, err
}
