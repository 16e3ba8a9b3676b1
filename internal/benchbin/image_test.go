package benchbin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/benchbin"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/testenv"
)

// TestHostMatchesImage checks what `nearnative image build` promises: the
// programs on the host are byte for byte the ones in the current workload
// image, and both are this nearnative's builds.
func TestHostMatchesImage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the workload image and the installed programs")
	}
	host := map[string]string{}
	for _, p := range benchbin.Programs {
		if err := p.CheckHost(); err != nil {
			t.Fatalf("host: %v", err)
		}
		b, err := os.ReadFile(p.Path())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		host[p.Path()] = hex.EncodeToString(sum[:])
	}
	run := runid.New()
	ctr := testenv.Platforms(t, run, t.TempDir(), platform.DockerHost)[platform.DockerHost]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := platform.Spec{Name: "sums", Command: func(platform.Listen) []string {
		argv := []string{"sha256sum"}
		for _, p := range benchbin.Programs {
			argv = append(argv, p.Path())
		}
		return argv
	}}
	res, err := ctr.(platform.JobRunner).RunJob(ctx, "sums", spec)
	if err != nil {
		t.Fatalf("sha256sum in the image: %v: %s", err, res.Stderr)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		sum, path, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("sha256sum line %q", line)
		}
		seen++
		if host[path] != sum {
			t.Errorf("%s: host %s, image %s", path, host[path], sum)
		}
	}
	if seen != len(benchbin.Programs) {
		t.Errorf("the image had %d of the %d programs", seen, len(benchbin.Programs))
	}
}
