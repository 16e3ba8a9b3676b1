package cli

import (
	"errors"
	"testing"

	"github.com/nearnative/nearnative/internal/study"
	"github.com/nearnative/nearnative/internal/workload/fio"
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
			err = s.Apply(study.Overrides{Quick: quick}, reg)
			if errors.Is(err, fio.ErrNoSpace) {
				// The study is well formed; this machine's disk is too
				// small for its full sizes (fio's file outgrows the RAM).
				t.Logf("%s (quick %v): %v", info.Name, quick, err)
				continue
			}
			if err != nil {
				t.Errorf("%s (quick %v): %v", info.Name, quick, err)
			}
		}
	}
}
