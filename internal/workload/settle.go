package workload

import (
	"context"
	"fmt"
	"time"
)

// Settling lets a stack work off what an overloaded find-max step left
// queued before the next step measures it. A step far above the stack's
// capacity leaves requests queued in its servers (application threads,
// database), which go on being served after the driver stops: the next
// step, at a load the stack holds, then meets that backlog and fails, and
// the search settles far below the peak (an auction search passed 1700
// users, failed at 3400 and 3060, then failed 1700 too and ended at 850).
// Weathervane's minutes-long warm-ups let a stack drain; seconds-long quick
// steps do not.

// SettleBusy is the servers' CPU, in cores, below which a stack counts as
// drained.
const SettleBusy = 0.25

// SettleMax bounds the wait: a stack still busy after it is measured as it
// is (the step's notes say how long it waited).
const SettleMax = 30 * time.Second

// settleTick is the interval over which the servers' CPU is read.
const settleTick = time.Second

// Settle waits until the servers' CPU, read by cpu (their total CPU time so
// far), stays below SettleBusy cores over a second, or SettleMax passes. It
// returns how long it waited and whether the stack drained.
func Settle(ctx context.Context, cpu func(context.Context) (time.Duration, error)) (time.Duration, bool, error) {
	return settle(ctx, cpu, settleTick, SettleMax)
}

// SettleTiers is Settle over the servers' CPU time as tiers reads it, per
// tier: the stack has drained when its tiers together are below
// SettleBusy.
func SettleTiers(ctx context.Context, tiers func(context.Context) (map[string]time.Duration, error)) (time.Duration, bool, error) {
	return Settle(ctx, total(tiers))
}

// total reads the sum of what tiers reads.
func total(tiers func(context.Context) (map[string]time.Duration, error)) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		ts, err := tiers(ctx)
		var sum time.Duration
		for _, v := range ts {
			sum += v
		}
		return sum, err
	}
}

func settle(ctx context.Context, cpu func(context.Context) (time.Duration, error), tick, most time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	prevAt := start
	prev, err := cpu(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("reading the servers' CPU while they settle: %w", err)
	}
	for {
		t := time.NewTimer(tick)
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Since(start), false, ctx.Err()
		case <-t.C:
		}
		now, err := cpu(ctx)
		at := time.Now()
		if err != nil {
			return time.Since(start), false, fmt.Errorf("reading the servers' CPU while they settle: %w", err)
		}
		if float64(now-prev)/float64(at.Sub(prevAt)) < SettleBusy {
			return time.Since(start), true, nil
		}
		if time.Since(start) >= most {
			return time.Since(start), false, nil
		}
		prev, prevAt = now, at
	}
}
