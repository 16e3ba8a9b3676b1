package auction

import (
	"context"
	"fmt"
	"math/rand/v2"
)

// The rows of Main that the choosers pick.
const (
	rowLogout, rowBrowseOrJoin, rowLeave = 0, 1, 2 // after GetActiveAuctions
	rowBid, rowLeaveEnded, rowOther      = 0, 1, 2 // BidLeaveOther
)

// Chooser names the chooser of each state of Main (transitionChoosers of
// auction.mainUser.behavior.json): "" is the default (the first row).
var Chooser = map[string]string{
	OpGetActiveAuctions:    "LogoutJoinLeave",
	OpUpdateUserProfile:    "BidLeaveOther",
	OpJoinAuction:          "BidLeaveOther",
	OpGetBidHistory:        "BidLeaveOther",
	OpGetAttendanceHistory: "BidLeaveOther",
	OpGetPurchaseHistory:   "BidLeaveOther",
}

// Step runs the user's next operation: HomePage at first and after
// logout, then as the Markov chain Main chooses. A failed operation ends
// the visit: the user drops its session (and the auctions it follows) and
// starts again at HomePage as a new visitor. An operation cut off because
// ctx ended is not a failure: the user keeps its state and chooses again
// when it next steps (a driver pausing its users between runs).
func (u *User) Step(ctx context.Context, rec Recorder) (bool, error) {
	u.mu.Lock()
	state := u.state
	u.mu.Unlock()
	next := 0 // HomePage
	if state >= 0 {
		next = u.choose(state)
	}
	op := Ops[next].Name
	err := rec.Do(ctx, op, u.op(op))
	if err != nil && ctx.Err() != nil {
		return true, err
	}
	u.mu.Lock()
	u.state = next
	u.mu.Unlock()
	if err != nil {
		u.reset()
		u.mu.Lock()
		u.state = -1
		u.mu.Unlock()
	}
	return true, err
}

// op is the method that runs operation name.
func (u *User) op(name string) func(context.Context) error {
	switch name {
	case OpHomePage:
		return u.HomePage
	case OpRegister:
		return u.Register
	case OpLogin:
		return u.Login
	case OpGetActiveAuctions:
		return u.GetActiveAuctions
	case OpGetAuctionDetail:
		return u.GetAuctionDetail
	case OpGetUserProfile:
		return u.GetUserProfile
	case OpUpdateUserProfile:
		return u.UpdateUserProfile
	case OpJoinAuction:
		return u.JoinAuction
	case OpPlaceBid:
		return u.PlaceBid
	case OpLeaveAuction:
		return u.LeaveAuction
	case OpGetBidHistory:
		return u.GetBidHistory
	case OpGetAttendanceHistory:
		return u.GetAttendanceHistory
	case OpGetPurchaseHistory:
		return u.GetPurchaseHistory
	case OpGetItemDetail:
		return u.GetItemDetail
	case OpGetImageForItem:
		return u.GetImageForItem
	case OpAddItem:
		return u.AddItem
	case OpAddImageForItem:
		return u.AddImageForItem
	case OpLogout:
		return u.Logout
	}
	return func(context.Context) error { return nil } // NoOperation, and the follower's ops never reach here
}

// choose picks the operation after state: the chooser of the state picks a
// row of Main (and the operation's target), the row's percentages the
// operation.
func (u *User) choose(state int) int {
	rows := Main[state]
	r := 0
	switch Chooser[Ops[state].Name] {
	case "LogoutJoinLeave":
		r = u.logoutJoinLeave()
	case "BidLeaveOther":
		r = u.bidLeaveOther()
	}
	return draw(u.r, rows[r])
}

// draw picks an index with the row's percentages.
func draw(r *rand.Rand, row []float64) int {
	var sum float64
	for _, p := range row {
		sum += p
	}
	x := r.Float64() * sum
	for i, p := range row {
		if x < p {
			return i
		}
		x -= p
	}
	for i := len(row) - 1; i >= 0; i-- { // rounding: the last non-zero
		if row[i] > 0 {
			return i
		}
	}
	panic(fmt.Sprintf("auction: transition row without transitions: %v", row))
}

// logoutJoinLeave picks the row after GetActiveAuctions (Weathervane's
// LogoutJoinLeaveTransitionChooser): log out when there are no running
// auctions; leave one when following the most already; else browse or
// join. (Its first rule, leave an auction that has ended, never applies
// here: live auctions start over with their items rather than end.)
func (u *User) logoutJoinLeave() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.leave = nil
	switch {
	case len(u.active) == 0:
		return rowLogout
	case len(u.followers) >= MaxAttended:
		u.leave = u.followers[u.r.IntN(len(u.followers))]
		return rowLeave
	}
	return rowBrowseOrJoin
}

// bidLeaveOther picks the row after the operations that may lead to a bid
// (Weathervane's BidLeaveOtherTransitionChooser): going through the
// followed auctions in random order, bid in the first whose item is open,
// whose high bidder is someone else, and where the bid strategy says to
// bid; else browse.
func (u *User) bidLeaveOther() int {
	u.mu.Lock()
	fs := append([]*Follower(nil), u.followers...)
	me := u.account
	credit := cents(u.profile.CreditLimit)
	u.bidOn = nil
	u.mu.Unlock()
	u.r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	for _, f := range fs {
		st, ok := f.State()
		if !ok || !st.Live() || (st.BidderID != nil && *st.BidderID == me) {
			continue
		}
		if shouldBid(u.r, f.high(), credit) {
			u.mu.Lock()
			u.bidOn = f
			u.mu.Unlock()
			return rowBid
		}
	}
	return rowOther
}

// shouldBid is Weathervane's RandomBidStrategy.shouldBid: with probability
// BidProbability, when the largest possible next bid stays below the
// credit limit and MaxBid (amounts in cents).
func shouldBid(r *rand.Rand, cur, credit int64) bool {
	maxNext := float64(cur) * (1 + BidRaiseMax)
	return r.Float64() <= BidProbability && maxNext < float64(credit) && maxNext < MaxBid*100
}

// Step runs the follower's next operation: GetCurrentItem first and after
// its item closed, else GetNextBid (Weathervane's followAuction behaviour
// and GetNextBidTransitionChooser). It returns false once the user left the
// auction or logged out.
func (f *Follower) Step(ctx context.Context, rec Recorder) (bool, error) {
	if f.stopped() {
		return false, nil
	}
	f.mu.Lock()
	op := f.next
	f.mu.Unlock()
	var err error
	if op == OpGetCurrentItem {
		err = rec.Do(ctx, op, f.GetCurrentItem)
	} else {
		err = rec.Do(ctx, op, f.GetNextBid)
	}
	f.mu.Lock()
	switch {
	case err != nil || f.st == nil:
		f.next = OpGetCurrentItem
	case f.st.State == StateSold || f.st.State == StateNotSold || f.st.State == StatePending:
		f.next = OpGetCurrentItem
	default:
		f.next = OpGetNextBid
	}
	f.mu.Unlock()
	return !f.stopped(), err
}
