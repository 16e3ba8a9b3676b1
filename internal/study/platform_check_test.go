package study

import (
	"errors"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/workload"
)

// pickyWorkload's instances refuse every platform pinned with pin: spread.
type pickyWorkload struct{ fakeWorkload }

func (p pickyWorkload) New(workload.Values) (workload.Instance, error) { return pickyInstance{}, nil }

type pickyInstance struct{ fakeInstance }

func (pickyInstance) CheckPlatform(base string, o platform.Options) error {
	if o.Pin == platform.PinSpread {
		return errors.New("too many servers to pin")
	}
	return nil
}

// TestPlatformChecker checks that a workload's refusal of a platform's
// options stops the study before it runs (Apply), at the platform's line,
// and only when that platform is among the ones that will run; reading the
// study (Parse: a stored run, a file) does not ask this machine.
func TestPlatformChecker(t *testing.T) {
	reg := workload.NewRegistry(pickyWorkload{fakeWorkload{name: "picky"}})
	src := `name: p
platforms:
  - native
  - {name: native-pinned, base: native, options: {pin: spread}}
workloads:
  - {workload: picky, name: w}
quick: {rounds: 5, platforms: [native]}
`
	s, err := Parse([]byte(src), "p.yaml", reg)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	err = s.Apply(Overrides{}, reg)
	if err == nil || err.Error() != "p.yaml:4: platform native-pinned with workload w: too many servers to pin" {
		t.Errorf("Apply: %v", err)
	}
	if err := s.Apply(Overrides{Quick: true}, reg); err != nil {
		t.Errorf("Apply(quick), the pinned platform not among the quick ones: %v", err)
	}
	ok := strings.Replace(src, "options: {pin: spread}", "options: {cpuset: \"0\"}", 1)
	s, err = Parse([]byte(ok), "p.yaml", reg)
	if err != nil {
		t.Fatalf("Parse without the pin: %v", err)
	}
	if err := s.Apply(Overrides{}, reg); err != nil {
		t.Errorf("Apply without the pin: %v", err)
	}
}
