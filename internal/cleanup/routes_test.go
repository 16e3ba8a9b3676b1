package cleanup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nearnative/nearnative/internal/runid"
)

func TestRoutes(t *testing.T) {
	run := runid.New()
	tests := []struct {
		name    string
		record  string
		failOn  string
		deleted []string
		kept    bool // the record stays (a route could not be removed)
	}{
		{"two routes", "172.17.0.0/16 via 10.0.0.2\n172.18.0.0/16 via 10.0.0.2\n", "", []string{"172.17.0.0/16 10.0.0.2", "172.18.0.0/16 10.0.0.2"}, false},
		{"a bad line is skipped", "garbage\n172.17.0.0/16 via 10.0.0.2\n", "", []string{"172.17.0.0/16 10.0.0.2"}, false},
		{"a failure keeps the record", "172.17.0.0/16 via 10.0.0.2\n", "172.17.0.0/16", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, string(run)+".42"), []byte(tt.record), 0o600)
			// Another namespace's record (a test bed's other host) and a stray file.
			os.WriteFile(filepath.Join(dir, string(runid.New())+".43"), []byte("172.17.0.0/16 via 10.0.0.2\n"), 0o600)
			os.WriteFile(filepath.Join(dir, "not-a-run"), []byte("x"), 0o600)
			var deleted []string
			r := Routes{Dir: dir, NetNS: "42", Del: func(_ context.Context, dst, gw string) (bool, error) {
				if dst == tt.failOn {
					return false, errors.New("refused")
				}
				deleted = append(deleted, dst+" "+gw)
				return true, nil
			}}
			runs, err := r.Runs(context.Background())
			if err != nil || len(runs) != 1 || runs[0] != run {
				t.Fatalf("Runs = %v, %v; want [%s]", runs, err, run)
			}
			_, err = r.Remove(context.Background(), run)
			if (err != nil) != tt.kept {
				t.Errorf("Remove: %v", err)
			}
			if !reflect.DeepEqual(deleted, tt.deleted) {
				t.Errorf("deleted %v, want %v", deleted, tt.deleted)
			}
			if _, err := os.Stat(filepath.Join(dir, string(run)+".42")); (err == nil) != tt.kept {
				t.Errorf("record kept: %v, want %v", err == nil, tt.kept)
			}
		})
	}
}
