// Package auction is the user model of nearnative's Weathervane-style
// auction study (the application is apps/auction): every operation of
// Weathervane's auction user over HTTP/1.1 and JSON, the Markov chain that
// chooses them, the asynchronous loop that follows each joined auction, and
// the figures the load driver and the QoS rules need (operations, their
// response-time limits and target mix, the cycle time).
//
// The load driver paces and times: a User and each of its Followers is a
// Loop whose Step runs one operation through the driver's Recorder.
package auction

import (
	"context"
	"math/rand/v2"
	"time"
)

// Recorder times the operations of one simulated user (the load driver implements it).
type Recorder interface {
	// Do runs fn as one operation named op, timed from the call until fn returns; a
	// non-nil error counts as a failure of op and is returned.
	Do(ctx context.Context, op string, fn func(context.Context) error) error
}

// Loop is one closed loop of a simulated user: its main Markov chain (User)
// or the asynchronous loop that follows one joined auction (Follower). The
// driver runs each loop in a goroutine of its own and paces its steps by
// CycleTime from the start of the previous step.
type Loop interface {
	// Step runs the loop's next operation through rec. It returns false
	// when the loop has ended (a follower of an auction the user left or
	// logged out of); err is the operation's failure, already recorded.
	Step(ctx context.Context, rec Recorder) (more bool, err error)
}

// Spawner starts an asynchronous loop for a user: the driver runs and paces
// it like the user's main loop until its Step returns false.
type Spawner func(Loop)

// Names of the operations, as Weathervane names them.
const (
	OpHomePage             = "HomePage"
	OpRegister             = "Register"
	OpLogin                = "Login"
	OpGetActiveAuctions    = "GetActiveAuctions"
	OpGetAuctionDetail     = "GetAuctionDetail"
	OpGetUserProfile       = "GetUserProfile"
	OpUpdateUserProfile    = "UpdateUserProfile"
	OpJoinAuction          = "JoinAuction"
	OpGetCurrentItem       = "GetCurrentItem"
	OpGetNextBid           = "GetNextBid"
	OpPlaceBid             = "PlaceBid"
	OpLeaveAuction         = "LeaveAuction"
	OpGetBidHistory        = "GetBidHistory"
	OpGetAttendanceHistory = "GetAttendanceHistory"
	OpGetPurchaseHistory   = "GetPurchaseHistory"
	OpGetItemDetail        = "GetItemDetail"
	OpGetImageForItem      = "GetImageForItem"
	OpAddItem              = "AddItem"
	OpAddImageForItem      = "AddImageForItem"
	OpLogout               = "Logout"
	OpNoOperation          = "NoOperation"
)

// OpSpec is one operation's QoS rule.
type OpSpec struct {
	Name string
	// Limit is the response time that Percentile percent of the
	// operation's completions must meet, when CheckLimit.
	Limit      time.Duration
	Percentile float64
	CheckLimit bool
	// Mix is the operation's target share of all operations, in percent;
	// 0 means the share is not checked.
	Mix float64
}

// Ops are Weathervane's auction operations in its order (the index is the
// state of the Markov chain), with the rules of its main user behaviour:
// responseTimeLimits (seconds), responseTimeLimitsPercentile, mixPercentage
// and useResponseTime of workloadConfiguration/behaviorSpecs/
// auction.mainUser.behavior.json in vmware/weathervane (the spec
// "auctionMainUser" the harness runs). GetNextBid, a long poll, has no
// response-time rule.
var Ops = []OpSpec{
	{OpHomePage, 2 * time.Second, 99, true, 0.93},
	{OpRegister, 2 * time.Second, 99, true, 0},
	{OpLogin, 3 * time.Second, 99, true, 0.93},
	{OpGetActiveAuctions, 2 * time.Second, 99, true, 15.33},
	{OpGetAuctionDetail, 2 * time.Second, 99, true, 7.7},
	{OpGetUserProfile, 2 * time.Second, 99, true, 0.93},
	{OpUpdateUserProfile, 2 * time.Second, 99, true, 0.48},
	{OpJoinAuction, 3 * time.Second, 99, true, 7.03},
	{OpGetCurrentItem, 3 * time.Second, 99, true, 7.39},
	{OpGetNextBid, 60 * time.Second, 99, false, 38.68},
	{OpPlaceBid, 2 * time.Second, 99, true, 2.77},
	{OpLeaveAuction, 2 * time.Second, 99, true, 5.28},
	{OpGetBidHistory, 2 * time.Second, 99, true, 0.48},
	{OpGetAttendanceHistory, 2 * time.Second, 99, true, 0.46},
	{OpGetPurchaseHistory, 2 * time.Second, 99, true, 0.94},
	{OpGetItemDetail, 2 * time.Second, 99, true, 7.7},
	{OpGetImageForItem, 5 * time.Second, 99, true, 0.4},
	{OpAddItem, 2 * time.Second, 99, true, 1.42},
	{OpAddImageForItem, 5 * time.Second, 99, true, 0.22},
	{OpLogout, 3 * time.Second, 99, true, 0.93},
	{OpNoOperation, 0, 99, false, 0},
}

// MixTolerance is the relative tolerance of each operation's share: a
// target of 10% passes from 9% to 11% (mixPercentageTolerance 0.10 of the
// same behaviour spec; apps.md: "share within a relative tolerance").
const MixTolerance = 0.10

// MaxFailurePercent is the largest share of failed operations a run may
// have and pass (apps.md "Weathervane": failures at most 0.5%).
const MaxFailurePercent = 0.5

// OpIndex returns the index of op in Ops, or -1.
func OpIndex(op string) int {
	for i, o := range Ops {
		if o.Name == op {
			return i
		}
	}
	return -1
}

// CycleTime is how a loop is paced: each step starts a cycle time after the
// previous step started (or at once when that step took longer), the time
// drawn from a normal distribution clipped to [Min, Max]. A late step is not
// made up for.
type CycleTime struct {
	Mean, SD, Min, Max time.Duration
	// FromStart: the cycle runs from the previous step's start (Faban's
	// CYCLETIME), not from its end (THINKTIME).
	FromStart bool
}

// Cycle is Weathervane's auction cycle time: meanCycleTimes of 5 s for
// every state (auction.mainUser.behavior.json), normal with sd 1.25 s
// clipped to [2.5 s, 7.5 s], from the previous start (apps.md
// "Weathervane"; the harness runs with useThinkTime false).
var Cycle = CycleTime{Mean: 5 * time.Second, SD: 1250 * time.Millisecond, Min: 2500 * time.Millisecond, Max: 7500 * time.Millisecond, FromStart: true}

// Sample draws one cycle time.
func (c CycleTime) Sample(r *rand.Rand) time.Duration {
	d := time.Duration(float64(c.Mean) + r.NormFloat64()*float64(c.SD))
	return min(max(d, c.Min), c.Max)
}

// Main is Weathervane's main user behaviour: for the state (the last
// operation, an index into Ops) the rows of transition percentages to the
// next operation; a chooser (Chooser) picks the row from the user's state,
// the first row when the state has only one. From
// auction.mainUser.behavior.json's transitionMatrices.
var Main = [][][]float64{
	/* HomePage */ {row(2, 100)},
	/* Register */ {row(5, 100)},
	/* Login */ {row(5, 100)},
	/* GetActiveAuctions: logout | browse or join | leave */ {row(19, 100), row(4, 30, 7, 70), row(11, 100)},
	/* GetAuctionDetail */ {row(15, 100)},
	/* GetUserProfile */ {row(3, 100)},
	/* UpdateUserProfile */ bidLeaveOther,
	/* JoinAuction */ bidLeaveOther,
	/* GetCurrentItem */ {row(19, 100)},
	/* GetNextBid */ {row(19, 100)},
	/* PlaceBid */ {other},
	/* LeaveAuction */ {row(3, 100)},
	/* GetBidHistory */ bidLeaveOther,
	/* GetAttendanceHistory */ bidLeaveOther,
	/* GetPurchaseHistory */ bidLeaveOther,
	/* GetItemDetail */ {row(3, 95, 16, 5)},
	/* GetImageForItem */ {row(3, 95, 16, 5)},
	/* AddItem */ {row(3, 85, 18, 15)},
	/* AddImageForItem */ {row(3, 95, 18, 5)},
	/* Logout */ {row(0, 100)},
	/* NoOperation */ {row(19, 100)},
}

// other is the browsing row: auction detail 50, update profile 5, bid,
// attendance and purchase history 5, 5 and 10, add an item 15, log out 10.
var other = row(4, 50, 6, 5, 12, 5, 13, 5, 14, 10, 17, 15, 19, 10)

// bidLeaveOther are the rows of the "BidLeaveOther" chooser: bid | leave a
// finished auction | browse.
var bidLeaveOther = [][]float64{row(10, 100), row(11, 100), other}

// row builds a transition row from (next, percent) pairs.
func row(pairs ...float64) []float64 {
	r := make([]float64, len(Ops))
	for i := 0; i+1 < len(pairs); i += 2 {
		r[int(pairs[i])] = pairs[i+1]
	}
	return r
}

// MaxAttended is how many auctions a user follows at once
// (maxNumAsyncBehaviors).
const MaxAttended = 2

// Bidding, from Weathervane's RandomBidStrategy: a user not the high bidder
// bids with probability BidProbability, raising the high bid by a share
// drawn from normal(BidRaiseMean, BidRaiseSD) clipped to [BidRaiseMin,
// BidRaiseMax], and never past its credit limit or MaxBid.
const (
	BidProbability = 0.2
	BidRaiseMean   = 0.02
	BidRaiseSD     = 0.02
	BidRaiseMin    = 0.005
	BidRaiseMax    = 0.06
	MaxBid         = 1000.0
)

// PageSize is the size of the pages the user asks for (Weathervane's
// AuctionConstants.DEFAULT_PAGE_SIZE).
const PageSize = 5
