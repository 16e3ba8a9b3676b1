package auction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestOps(t *testing.T) {
	if len(Ops) != 21 || len(Main) != len(Ops) {
		t.Fatalf("%d operations, %d states: want Weathervane's 21", len(Ops), len(Main))
	}
	var mix float64
	for i, o := range Ops {
		mix += o.Mix
		if OpIndex(o.Name) != i {
			t.Errorf("OpIndex(%s) = %d, want %d", o.Name, OpIndex(o.Name), i)
		}
		if o.CheckLimit && (o.Limit < 2*time.Second || o.Limit > 5*time.Second) {
			t.Errorf("%s: limit %v outside Weathervane's 2-5 s", o.Name, o.Limit)
		}
	}
	if math.Abs(mix-100) > 0.01 {
		t.Errorf("target mix sums to %.2f%%, want 100%%", mix)
	}
	if Ops[OpIndex(OpGetNextBid)].CheckLimit {
		t.Error("GetNextBid (a long poll) must not have a response-time rule")
	}
	if OpIndex("Nope") != -1 {
		t.Error("OpIndex of an unknown operation")
	}
}

// TestMain checks every row of the chain: percentages summing to 100, no
// way into the follower's operations, and the chooser states with their
// three rows.
func TestMainMatrix(t *testing.T) {
	for s, rows := range Main {
		name := Ops[s].Name
		want := 1
		if Chooser[name] != "" {
			want = 3
		}
		if len(rows) != want {
			t.Errorf("%s: %d rows, want %d", name, len(rows), want)
		}
		for r, row := range rows {
			var sum float64
			for next, p := range row {
				sum += p
				if p > 0 && (next == OpIndex(OpGetCurrentItem) || next == OpIndex(OpGetNextBid) || next == OpIndex(OpNoOperation) || next == OpIndex(OpRegister)) {
					t.Errorf("%s row %d leads to %s, which only the follower (or nobody) runs", name, r, Ops[next].Name)
				}
			}
			if sum != 100 {
				t.Errorf("%s row %d sums to %v", name, r, sum)
			}
		}
	}
}

func TestDraw(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	row := Main[OpIndex(OpGetActiveAuctions)][rowBrowseOrJoin]
	n := map[int]int{}
	const draws = 20000
	for i := 0; i < draws; i++ {
		n[draw(r, row)]++
	}
	if len(n) != 2 {
		t.Fatalf("drew %v", n)
	}
	if join := float64(n[OpIndex(OpJoinAuction)]) / draws; math.Abs(join-0.7) > 0.02 {
		t.Errorf("JoinAuction drawn %.3f of the time, want 0.70", join)
	}
}

func TestCycleSample(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var sum time.Duration
	const n = 20000
	for i := 0; i < n; i++ {
		d := Cycle.Sample(r)
		if d < Cycle.Min || d > Cycle.Max {
			t.Fatalf("cycle time %v outside [%v, %v]", d, Cycle.Min, Cycle.Max)
		}
		sum += d
	}
	if mean := sum / n; mean < 4900*time.Millisecond || mean > 5100*time.Millisecond {
		t.Errorf("mean cycle time %v, want about 5s", mean)
	}
}

func TestNextBid(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	if got := nextBid(r, 12345, true); got != 12345 {
		t.Errorf("first bid %d, want the starting bid", got)
	}
	for i := 0; i < 1000; i++ {
		cur := int64(100 + r.IntN(100000))
		got := nextBid(r, cur, false)
		lo, hi := float64(cur)*(1+BidRaiseMin)-1, float64(cur)*(1+BidRaiseMax)+1
		if got <= cur || float64(got) < lo || float64(got) > hi {
			t.Fatalf("next bid over %d: %d, want in [%v, %v]", cur, got, lo, hi)
		}
	}
}

func TestShouldBid(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bids := 0
	const n = 10000
	for i := 0; i < n; i++ {
		if shouldBid(r, 50000, 1_000_000) {
			bids++
		}
		if shouldBid(r, 99000, 10_000_000) || shouldBid(r, 5000, 5200) {
			t.Fatal("bid past MaxBid or the credit limit")
		}
	}
	if p := float64(bids) / n; math.Abs(p-BidProbability) > 0.02 {
		t.Errorf("bid probability %.3f, want %.2f", p, BidProbability)
	}
}

func TestAccounts(t *testing.T) {
	a := NewAccounts(50, 1)
	seen := map[int64]bool{}
	for i := 0; i < 50; i++ {
		id, ok := a.take()
		if !ok || id < 1 || id > 50 || seen[id] {
			t.Fatalf("take %d: %d %v", i, id, ok)
		}
		seen[id] = true
	}
	if _, ok := a.take(); ok {
		t.Fatal("took a 51st account of 50")
	}
	a.put(7)
	if id, ok := a.take(); !ok || id != 7 {
		t.Errorf("after giving back 7: %d %v", id, ok)
	}
}

func follower(u *User, auction int64, st *ItemState) *Follower {
	f := newFollower(u, u.s, auction, 1)
	f.st = st
	return f
}

func TestChoosers(t *testing.T) {
	c := NewClient("127.0.0.1:1", nil)
	u := NewUser(c, NewAccounts(10, 1), 1, nil)
	u.account = 3
	u.profile.CreditLimit = 10000

	// LogoutJoinLeave.
	if r := u.logoutJoinLeave(); r != rowLogout {
		t.Errorf("no auctions running: row %d, want logout", r)
	}
	u.active = []Auction{{ID: 1}, {ID: 2}, {ID: 3}}
	if r := u.logoutJoinLeave(); r != rowBrowseOrJoin || u.leave != nil {
		t.Errorf("following none: row %d leave %v, want browse or join", r, u.leave)
	}
	amount, me, other := 100.0, int64(3), int64(4)
	open := func(bidder *int64) *ItemState {
		return &ItemState{ItemID: 9, State: StateOpen, Version: 2, Amount: &amount, BidderID: bidder}
	}
	f1, f2 := follower(u, 1, open(&me)), follower(u, 2, &ItemState{ItemID: 8, State: StateSold})
	u.followers = []*Follower{f1, f2}
	if r := u.logoutJoinLeave(); r != rowLeave || (u.leave != f1 && u.leave != f2) {
		t.Errorf("following the most: row %d leave %v, want leave one", r, u.leave)
	}

	// BidLeaveOther: never against oneself or on a closed item.
	for i := 0; i < 200; i++ {
		if r := u.bidLeaveOther(); r != rowOther || u.bidOn != nil {
			t.Fatalf("high bidder or closed item: row %d bidOn %v", r, u.bidOn)
		}
	}
	f1.st = open(&other)
	bid := 0
	for i := 0; i < 1000; i++ {
		if r := u.bidLeaveOther(); r == rowBid {
			bid++
			if u.bidOn != f1 {
				t.Fatalf("bid on %v, want the open item", u.bidOn)
			}
		}
	}
	if p := float64(bid) / 1000; math.Abs(p-BidProbability) > 0.05 {
		t.Errorf("chose to bid %.3f of the time, want about %.2f", p, BidProbability)
	}
}

// TestHTTPErrors checks that a status >= 400 or an error marker in the body
// is a failure whose text says which request failed and why.
func TestHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/auction/user/1":
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":"no user 1"}`)
		case "/auction/user/2":
			fmt.Fprint(w, `{"error":"broken"}`)
		case "/auction/user/3":
			fmt.Fprint(w, `{"id":3,"creditLimit":12.5}`)
		case "/static/a.css":
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(304)
				return
			}
			w.Header().Set("ETag", `"v1"`)
			fmt.Fprint(w, "body{}")
		case "/auction/image/1/thumb":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>")
		}
	}))
	defer srv.Close()
	c := &Client{base: srv.URL, tr: http.DefaultTransport.(*http.Transport)}
	s := newSession(c)
	ctx := context.Background()
	err := s.do(ctx, c, "GET", "/auction/user/1", nil, "", nil)
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 404 || err.Error() != "GET /auction/user/1: 404 Not Found: no user 1" {
		t.Errorf("404: %v", err)
	}
	if err := s.do(ctx, c, "GET", "/auction/user/2", nil, "", nil); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("error marker in a 200: %v", err)
	}
	var p Profile
	if err := s.do(ctx, c, "GET", "/auction/user/3", nil, "", &p); err != nil || p.ID != 3 || p.CreditLimit != 12.5 {
		t.Errorf("profile %+v %v", p, err)
	}
	for i := 0; i < 2; i++ { // the second time from the browser cache: 304
		if err := s.static(ctx, c, "/static/a.css"); err != nil {
			t.Errorf("static %d: %v", i, err)
		}
	}
	if s.etags["/static/a.css"] != `"v1"` {
		t.Errorf("browser cache %v", s.etags)
	}
	if err := s.image(ctx, c, "/auction/image/1/thumb"); err == nil || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("an HTML answer for an image: %v", err)
	}
}

func TestMoney(t *testing.T) {
	for c, want := range map[int64]string{0: "0.00", 5: "0.05", 12345: "123.45", 100000: "1000.00"} {
		if got := string(money(c)); got != want {
			t.Errorf("money(%d) = %s, want %s", c, got, want)
		}
	}
	if cents(123.45) != 12345 || cents(0.1+0.2) != 30 {
		t.Error("cents rounds wrongly")
	}
}
