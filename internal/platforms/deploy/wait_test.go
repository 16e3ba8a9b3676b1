package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeServer is a platform.Server that never exits.
type fakeServer struct{}

func (fakeServer) Addr(string) string                        { return "127.0.0.1:1" }
func (fakeServer) Command() []string                         { return []string{"fake"} }
func (fakeServer) Describe() string                          { return "fake" }
func (fakeServer) Stop(context.Context) error                { return nil }
func (fakeServer) LogTail(context.Context, int) string       { return "last line" }
func (fakeServer) Exited(ctx context.Context) error          { return nil }
func (fakeServer) Migrations(context.Context) (int64, error) { return 0, nil }

type finalErr struct{ error }

func (finalErr) Final() bool { return true }

// TestWaitFinal: a probe error marked final ends the wait at once, with the
// log tail; other errors are retried until the timeout.
func TestWaitFinal(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		timeout time.Duration
		want    string
		fast    bool
	}{
		{"final", finalErr{errors.New("PHP extension gd is not loaded")}, 10 * time.Second, "is not ready at 127.0.0.1:1: PHP extension gd is not loaded; last log lines:\n  last line", true},
		{"wrapped final", errors.Join(errors.New("probe"), finalErr{errors.New("refused")}), 10 * time.Second, "refused", true},
		{"transient", errors.New("connection refused"), 300 * time.Millisecond, "was not ready at 127.0.0.1:1 within 300ms: connection refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			start := time.Now()
			err := Wait(context.Background(), "i0-fpm-0", fakeServer{}, "fcgi", tt.timeout, func(context.Context, string) error {
				calls++
				return tt.err
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if tt.fast && (calls != 1 || time.Since(start) > 5*time.Second) {
				t.Errorf("a final error was probed %d times over %v", calls, time.Since(start))
			}
			if !tt.fast && calls < 2 {
				t.Errorf("a transient error was probed %d times", calls)
			}
		})
	}
}
