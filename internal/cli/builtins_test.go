package cli

import (
	"testing"

	"github.com/nearnative/nearnative/internal/study"
)

// TestBuiltinStudies loads every built-in study against the real workload
// registry, with and without --quick.
func TestBuiltinStudies(t *testing.T) {
	infos, err := study.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	reg := Registry()
	for _, info := range infos {
		for _, quick := range []bool{false, true} {
			s, err := study.Load(info.Name, reg)
			if err != nil {
				t.Errorf("%s: %v", info.Name, err)
				continue
			}
			if err := s.Apply(study.Overrides{Quick: quick}, reg); err != nil {
				t.Errorf("%s (quick %v): %v", info.Name, quick, err)
			}
		}
	}
}
