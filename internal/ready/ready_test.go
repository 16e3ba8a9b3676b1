package ready

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	refused := syscall.ECONNREFUSED
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		loop  Loop
		fails int   // attempts that fail before one passes
		err   error // what a failing attempt returns
		want  string
		is    error
		tries int
	}{
		{"passes on the third", context.Background(), Loop{Timeout: time.Second, Every: time.Millisecond}, 2, refused, "", nil, 3},
		{"times out", context.Background(), Loop{Timeout: 30 * time.Millisecond, Every: time.Millisecond}, 1 << 30, refused, "not ready within 30ms: connection refused", refused, -1},
		{"final stops at once", context.Background(), Loop{Timeout: time.Second, Every: time.Millisecond}, 1 << 30, Final(errors.New("wrong password")), "wrong password", nil, 1},
		{"cancelled", cancelled, Loop{Timeout: time.Second}, 1 << 30, refused, "context canceled", context.Canceled, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := tc.loop.Wait(tc.ctx, func(context.Context) error {
				tries++
				if tries <= tc.fails {
					return tc.err
				}
				return nil
			})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Wait = %v, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Wait = %v, want it to match %v", err, tc.is)
			}
			if tc.tries > 0 && tries != tc.tries {
				t.Errorf("%d attempts, want %d", tries, tc.tries)
			}
		})
	}
}

func TestWaitKeepsTheErrorBeforeTheDeadline(t *testing.T) {
	err := Loop{Timeout: 50 * time.Millisecond, Every: time.Millisecond}.Wait(context.Background(), func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); ok && time.Until(mustDeadline(ctx)) < 20*time.Millisecond {
			<-ctx.Done()
			return ctx.Err()
		}
		return syscall.ECONNREFUSED
	})
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Wait = %v, want the refusal before the deadline", err)
	}
}

func mustDeadline(ctx context.Context) time.Time { d, _ := ctx.Deadline(); return d }
