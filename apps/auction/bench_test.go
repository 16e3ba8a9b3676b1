package auction

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// The data's generation and load times per size, for BENCH.md:
//
//	go test -run '^$' -bench . -benchtime 1x ./apps/auction
var benchSizes = []int{30, 300, 1500}

// BenchmarkGenerate times making every row of the data without a database.
func BenchmarkGenerate(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("u%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				d, err := Generate(Size{n}, 1)
				if err != nil {
					b.Fatal(err)
				}
				rows := 0
				for _, t := range d.Tables() {
					next := t.Rows()
					for r, err := next(); r != nil || err != nil; r, err = next() {
						if err != nil {
							b.Fatal(err)
						}
						rows++
					}
				}
				b.ReportMetric(float64(rows), "rows")
			}
		})
	}
}

// BenchmarkTemplate makes each size's template in a fresh state directory
// (initdb, COPY FREEZE, indexes, ANALYZE, shutdown) and copies it once, as
// a trial does.
func BenchmarkTemplate(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("u%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				// Not in /tmp's private test dirs: the postgres user must
				// reach the template.
				root, err := os.MkdirTemp("/var/tmp", "nn-auction-bench-")
				if err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(root)
				os.Chmod(root, 0o755)
				run := runid.New()
				p, err := native.New("native", platform.Env{Run: run, LogDir: root + "/logs"}, state.Dir{Root: root}, platform.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				t, err := EnsureTemplate(context.Background(), TemplateOptions{State: state.Dir{Root: root}, Size: Size{n}, Seed: 1, Platform: p, Run: run})
				if err != nil {
					b.Fatal(err)
				}
				st := time.Now()
				if err := t.CopyTo(root+"/copy", 0, 0); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(t.Info.Prepare.Seconds(), "prepare-s")
				b.ReportMetric(t.Info.Load.Seconds(), "load-s")
				b.ReportMetric(time.Since(st).Seconds(), "copy-s")
				b.ReportMetric(float64(t.Info.Bytes)/(1<<20), "MB")
			}
		})
	}
}
