package auction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/auction/auctiontest"
)

// counter is the trivial Recorder of the tests: it runs fn and counts
// operations and failures (none counted once ctx is done: the end of a
// run cuts operations short).
type counter struct {
	mu   sync.Mutex
	n    map[string]int
	fail map[string]int
	errs []string
}

func newCounter() *counter { return &counter{n: map[string]int{}, fail: map[string]int{}} }

func (c *counter) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	err := fn(ctx)
	if ctx.Err() != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
	if err != nil {
		c.fail[op]++
		if len(c.errs) < 20 {
			c.errs = append(c.errs, op+": "+err.Error())
		}
	}
	return err
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for k := range c.n {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, c.n[k])
		if c.fail[k] > 0 {
			fmt.Fprintf(&b, "(%d failed)", c.fail[k])
		}
	}
	return b.String()
}

// testIdle is the item idle time of the tests (Weathervane: 30 s).
const testIdle = 3 * time.Second

// twoUsers runs two users through the sale of an item
// against the real stack started natively (PostgreSQL, RabbitMQ, two
// Tomcat application servers, nginx): both join, one bids and the other's
// long poll wakes, the other outbids, bids below the high bid and by the
// high bidder are rejected, the item goes to last call and is sold to the
// right winner, and the auction moves to its next item. It runs once with
// both users through nginx and once with each user on its own application
// server, so that every wake-up crosses the broker.
func TestIntegration(t *testing.T) {
	s := auctiontest.Start(t, auctiontest.Options{MaxUsers: 30, AppServers: 2, ItemIdle: testIdle})
	t.Run("two users through an auction", func(t *testing.T) { twoUsers(t, s) })
	t.Run("user model", func(t *testing.T) { userModel(t, s) })
}

func twoUsers(t *testing.T, s *auctiontest.Stack) {
	cases := []struct {
		name       string
		alice, bob string // the address each user talks to
		auction    int    // index of the live auction on the first page
		aliceID    int64
		bobID      int64
	}{
		{"through nginx", s.Web, s.Web, 0, 11, 12},
		{"across app servers", s.Apps[0], s.Apps[1], 1, 21, 22},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			ca, cb := NewClient(tc.alice, nil), NewClient(tc.bob, nil)
			defer ca.Close()
			defer cb.Close()
			rec := newCounter()
			acc := NewAccounts(0, 1)
			alice, bob := NewUser(ca, acc, 1, nil), NewUser(cb, acc, 2, nil)
			must := func(op string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
			}
			for _, u := range []struct {
				u  *User
				id int64
			}{{alice, tc.aliceID}, {bob, tc.bobID}} {
				if tc.alice == s.Web { // nginx serves the home page
					must("HomePage", rec.Do(ctx, OpHomePage, u.u.HomePage))
				}
				must("Login", rec.Do(ctx, OpLogin, func(ctx context.Context) error { return u.u.LoginAs(ctx, u.id) }))
				must("GetUserProfile", rec.Do(ctx, OpGetUserProfile, u.u.GetUserProfile))
			}
			must("GetActiveAuctions", rec.Do(ctx, OpGetActiveAuctions, alice.GetActiveAuctions))
			alice.mu.Lock()
			total := alice.activeTotal
			alice.mu.Unlock()
			if total != 2 {
				t.Fatalf("running auctions: %d, want 2 (ceil(30/15))", total)
			}
			// Page 0 holds both auctions, in id order.
			var pg page[Auction]
			must("list", alice.sess().do(ctx, ca, "GET", "/auction/live/auction?pageSize=5&page=0", nil, "", &pg))
			auctionID := pg.Items[tc.auction].ID

			var fa, fb *Follower
			must("JoinAuction", rec.Do(ctx, OpJoinAuction, func(ctx context.Context) (err error) { fa, err = alice.Join(ctx, auctionID); return }))
			must("JoinAuction", rec.Do(ctx, OpJoinAuction, func(ctx context.Context) (err error) { fb, err = bob.Join(ctx, auctionID); return }))

			// Wait for the item on sale to close, so that the test starts
			// with a fresh one (items without bids close after 2 idle
			// times).
			for {
				must("GetNextBid", rec.Do(ctx, OpGetNextBid, fa.GetNextBid))
				if st, _ := fa.State(); !st.Live() {
					break
				}
			}
			// The next item opens a moment after the last one closed (on a
			// busy machine the gap is long enough for one user to still see
			// the closed item): ask again until both see the new one.
			var sa, sb ItemState
			for try := 0; ; try++ {
				must("GetCurrentItem", rec.Do(ctx, OpGetCurrentItem, fa.GetCurrentItem))
				must("GetCurrentItem", rec.Do(ctx, OpGetCurrentItem, fb.GetCurrentItem))
				sa, _ = fa.State()
				sb, _ = fb.State()
				if sa.ItemID == sb.ItemID && sa.Live() {
					break
				}
				if try == 50 {
					t.Fatalf("both users should see the same fresh item: alice %+v, bob %+v", sa, sb)
				}
				time.Sleep(100 * time.Millisecond)
			}
			item, _ := fa.Item()
			if sa.BidCount != 0 {
				t.Fatalf("the fresh item has %d bids: alice %+v, bob %+v", sa.BidCount, sa, sb)
			}
			t.Logf("item %d (%s) opened, starting bid %.2f", item.ID, item.Name, item.StartingBid)

			// poll runs GetNextBid in the background and reports when it
			// completes. A poll that completes before the bid must have
			// seen the item go to last call (the machine was too slow to
			// bid within the idle time): it is polled again.
			poll := func(f *Follower) <-chan time.Time {
				t.Helper()
				for i := 0; ; i++ {
					done := make(chan time.Time, 1)
					go func() {
						if err := rec.Do(ctx, OpGetNextBid, f.GetNextBid); err != nil {
							t.Errorf("GetNextBid: %v", err)
						}
						done <- time.Now()
					}()
					time.Sleep(300 * time.Millisecond)
					select {
					case <-done:
						if st, _ := f.State(); st.State != StateLastCall || i == 3 {
							t.Fatalf("GetNextBid returned %+v before the bid", st)
						}
						t.Logf("the item went to last call before the bid; polling again")
						continue
					default:
					}
					return done
				}
			}
			bid := func(u *User, f *Follower, amount int64, want string) BidResult {
				t.Helper()
				var res BidResult
				must("PlaceBid", rec.Do(ctx, OpPlaceBid, func(ctx context.Context) (err error) { res, err = u.Bid(ctx, f, amount); return }))
				if res.Result != want {
					t.Fatalf("bid of %s: %s (%s), want %s", money(amount), res.Result, res.Reason, want)
				}
				return res
			}
			woke := func(done <-chan time.Time, after time.Time, who string) {
				t.Helper()
				select {
				case at := <-done:
					if d := at.Sub(after); d > testIdle {
						t.Errorf("%s's long poll woke %v after the bid, later than the idle time %v", who, d, testIdle)
					} else {
						t.Logf("%s's long poll woke %v after the bid", who, d.Round(time.Millisecond))
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s's long poll did not wake", who)
				}
			}

			// Alice bids the starting bid; Bob's long poll wakes with it.
			start := cents(item.StartingBid)
			bobWaits := poll(fb)
			bid(alice, fa, start, "ACCEPTED")
			woke(bobWaits, time.Now(), "bob")
			if st, _ := fb.State(); st.BidderID == nil || *st.BidderID != tc.aliceID || cents(*st.Amount) != start || st.BidCount != 1 {
				t.Fatalf("bob sees %+v, want alice's bid of %s", st, money(start))
			}

			// Bob outbids her; Alice's long poll wakes and she is outbid.
			higher := start + 250
			aliceWaits := poll(fa)
			lastBid := time.Now()
			bid(bob, fb, higher, "ACCEPTED")
			woke(aliceWaits, time.Now(), "alice")
			if st, _ := fa.State(); st.BidderID == nil || *st.BidderID != tc.bobID || cents(*st.Amount) != higher {
				t.Fatalf("alice sees %+v, want bob's bid of %s", st, money(higher))
			}

			// Validation: not above the high bid, and the high bidder again.
			if r := bid(alice, fa, higher, "REJECTED"); !strings.Contains(r.Reason, "not above") {
				t.Errorf("a bid equal to the high bid: reason %q", r.Reason)
			}
			if r := bid(bob, fb, higher+500, "REJECTED"); !strings.Contains(r.Reason, "already the high bidder") {
				t.Errorf("a bid by the high bidder: reason %q", r.Reason)
			}

			// Nobody bids: last call after the idle time, then sold to Bob.
			must("GetNextBid", rec.Do(ctx, OpGetNextBid, fa.GetNextBid))
			st, _ := fa.State()
			if st.State != StateLastCall {
				t.Fatalf("after the idle time: %+v, want LASTCALL", st)
			}
			if d := time.Since(lastBid); d < testIdle/2 {
				t.Errorf("last call came %v after the last bid, want about the idle time %v", d, testIdle)
			}
			must("GetNextBid", rec.Do(ctx, OpGetNextBid, fa.GetNextBid))
			st, _ = fa.State()
			if st.State != StateSold || st.BidderID == nil || *st.BidderID != tc.bobID || cents(*st.Amount) != higher {
				t.Fatalf("the item closed as %+v, want SOLD to bob (%d) for %s", st, tc.bobID, money(higher))
			}
			t.Logf("item %d sold to user %d for %.2f", st.ItemID, *st.BidderID, *st.Amount)

			// Bob's long poll also sees the sale (after the last call,
			// unless it asks late enough to see only the sale).
			for i := 0; i < 2; i++ {
				must("GetNextBid", rec.Do(ctx, OpGetNextBid, fb.GetNextBid))
				if st, _ := fb.State(); !st.Live() {
					break
				}
			}
			if st, _ := fb.State(); st.State != StateSold || *st.BidderID != tc.bobID {
				t.Errorf("bob sees %+v after the sale", st)
			}
			// The auction moved on to its next item.
			must("GetCurrentItem", rec.Do(ctx, OpGetCurrentItem, fa.GetCurrentItem))
			next, _ := fa.Item()
			if next.ID == item.ID || next.State != StateOpen {
				t.Errorf("the auction's current item after the sale: %d (%s), want a new open item", next.ID, next.State)
			}
			// The purchase is in Bob's history, the item shows the winner.
			var purchases page[struct {
				ItemID int64   `json:"itemId"`
				Price  float64 `json:"price"`
			}]
			must("purchases", bob.sess().do(ctx, cb, "GET", fmt.Sprintf("/auction/item/user/%d/purchased?pageSize=5&page=0", tc.bobID), nil, "", &purchases))
			if len(purchases.Items) == 0 || purchases.Items[0].ItemID != item.ID || cents(purchases.Items[0].Price) != higher {
				t.Errorf("bob's latest purchases %+v, want item %d for %s", purchases.Items, item.ID, money(higher))
			}
			must("GetItemDetail", rec.Do(ctx, OpGetItemDetail, func(ctx context.Context) error { return alice.ItemDetail(ctx, item.ID) }))
			if it := alice.item; it.State != StateSold || it.HighBidderID == nil || *it.HighBidderID != tc.bobID {
				t.Errorf("item detail after the sale: %+v", it)
			}
			// Both bids of each are in their bid histories.
			must("GetBidHistory", rec.Do(ctx, OpGetBidHistory, alice.GetBidHistory))

			must("LeaveAuction", rec.Do(ctx, OpLeaveAuction, func(ctx context.Context) error { return alice.Leave(ctx, fa) }))
			must("LeaveAuction", rec.Do(ctx, OpLeaveAuction, func(ctx context.Context) error { return bob.Leave(ctx, fb) }))
			must("Logout", rec.Do(ctx, OpLogout, alice.Logout))
			must("Logout", rec.Do(ctx, OpLogout, bob.Logout))
			// A logged-out session is refused.
			if err := alice.sess().do(ctx, ca, "GET", fmt.Sprintf("/auction/user/%d", tc.aliceID), nil, "", nil); err == nil || !strings.Contains(err.Error(), "401") {
				t.Errorf("a request after logout: %v, want 401", err)
			}
			t.Logf("operations:%s", rec)
		})
	}
}

// userModel runs simulated users with the Markov chain and their followers,
// paced by a trivial driver with a cycle time 50 times shorter than
// Weathervane's, and checks that every operation they chose succeeded.
func userModel(t *testing.T, s *auctiontest.Stack) {
	const users, length = 8, 20 * time.Second
	cycle := CycleTime{Mean: Cycle.Mean / 50, SD: Cycle.SD / 50, Min: Cycle.Min / 50, Max: Cycle.Max / 50, FromStart: true}
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	c := NewClient(s.Web, nil)
	defer c.Close()
	rec := newCounter()
	acc := NewAccounts(30*5, 7)
	var wg sync.WaitGroup
	var run func(l Loop, seed uint64)
	run = func(l Loop, seed uint64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1))
			for ctx.Err() == nil {
				start := time.Now()
				if more, _ := l.Step(ctx, rec); !more {
					return
				}
				select {
				case <-time.After(time.Until(start.Add(cycle.Sample(r)))):
				case <-ctx.Done():
				}
			}
		}()
	}
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	var us []*User
	var seeds atomic.Uint64
	for i := 0; i < users; i++ {
		u := NewUser(c, acc, uint64(100+i), func(l Loop) { run(l, 1000+seeds.Add(1)) })
		us = append(us, u)
		run(u, uint64(i))
	}
	wg.Wait()
	for _, u := range us {
		u.Stop()
	}
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	t.Logf("%d users for %v:%s", users, length, rec)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ops := 0
	for _, n := range rec.n {
		ops += n
	}
	t.Logf("the users' own CPU (this process): %v for %d operations, %v per operation", cpu.Round(time.Millisecond), ops, (cpu / time.Duration(max(ops, 1))).Round(time.Microsecond))
	for op, n := range rec.fail {
		t.Errorf("%s failed %d times", op, n)
	}
	for _, e := range rec.errs {
		t.Log(e)
	}
	// The operations the chain reaches every few cycles must have run.
	for _, op := range []string{OpHomePage, OpLogin, OpGetUserProfile, OpGetActiveAuctions, OpJoinAuction,
		OpGetCurrentItem, OpGetNextBid, OpPlaceBid, OpGetAuctionDetail, OpGetItemDetail} {
		if rec.n[op] == 0 {
			t.Errorf("no %s in %v", op, length)
		}
	}
}
