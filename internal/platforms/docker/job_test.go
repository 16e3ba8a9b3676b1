package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/platform"
)

func TestRunJob(t *testing.T) {
	p, env := newPlatform(t, platform.DockerNAT, "docker-nat", platform.Options{CPUSet: "0"})
	ctx := context.Background()
	tests := []struct {
		name     string
		argv     []string
		wantOut  string
		wantCode int
		wantErr  bool
	}{
		{"ok", []string{"redis-server", "--version"}, "Redis server v=", 0, false},
		{"fails", []string{"redis-server", "/nearnative/missing.conf"}, "", 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := platform.Spec{Name: "job", Command: func(platform.Listen) []string { return tc.argv }}
			res, err := p.RunJob(ctx, "job-"+tc.name, spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if res.ExitCode != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr %s)", res.ExitCode, tc.wantCode, res.Stderr)
			}
			if !strings.Contains(string(res.Stdout)+string(res.Stderr), tc.wantOut) {
				t.Errorf("output %q lacks %q", res.Stdout, tc.wantOut)
			}
			if !strings.Contains(res.Where, "cpuset=0") {
				t.Errorf("Where %q does not state the options", res.Where)
			}
		})
	}
	if left := runContainers(t, p.eng, env.Run); len(left) > 0 {
		t.Errorf("job containers left: %v", left)
	}
}
