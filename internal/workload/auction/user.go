package auction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	app "github.com/nearnative/nearnative/apps/auction"
)

// Accounts hands out the registered users to log in as: a simulated user
// logs in as one that nobody is logged in as, and gives it back at logout
// (Weathervane's pool of available user names). The data has
// UsersPerMaxUser of them per simulated user.
type Accounts struct {
	mu   sync.Mutex
	free []int64
	r    *rand.Rand
}

// NewAccounts returns the pool of registered users 1..n.
func NewAccounts(n int, seed uint64) *Accounts {
	a := &Accounts{free: make([]int64, n), r: rand.New(rand.NewPCG(seed, 0xacc))}
	for i := range a.free {
		a.free[i] = int64(i + 1)
	}
	return a
}

// NewAccountsOf returns the pool of the given registered users (a driver
// gives each simulated user a disjoint share of them).
func NewAccountsOf(ids []int64, seed uint64) *Accounts {
	return &Accounts{free: append([]int64(nil), ids...), r: rand.New(rand.NewPCG(seed, 0xacc))}
}

func (a *Accounts) take() (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		return 0, false
	}
	i := a.r.IntN(len(a.free))
	id := a.free[i]
	a.free[i] = a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	return id, true
}

func (a *Accounts) put(id int64) {
	a.mu.Lock()
	a.free = append(a.free, id)
	a.mu.Unlock()
}

// User is one simulated user: its session (cookies, browser cache), the
// registered user it is logged in as, what it has seen, and the auctions it
// follows. Each operation is a method; the Markov chain (Step) picks the
// next one and its target.
type User struct {
	c        *Client
	accounts *Accounts
	spawn    Spawner
	r        *rand.Rand // the main loop's; followers have their own

	mu          sync.Mutex
	s           *session
	account     int64 // 0: logged out
	profile     Profile
	active      []Auction
	activeTotal int64 // -1: not known yet
	followers   []*Follower
	items       []Item // items seen last (auction detail, current items)
	item        *Item  // the item viewed in detail last
	added       int64  // the item added last

	// Targets of the next operation, chosen by the chain.
	bidOn, leave *Follower

	state int // the last operation (index into Ops), -1 at start
	seq   atomic.Uint64
}

// NewUser returns a logged-out user whose first operation is HomePage. Its
// random choices come from seed. spawn starts the follower of each auction
// it joins (nil: followers are not run, a test drives them).
func NewUser(c *Client, accounts *Accounts, seed uint64, spawn Spawner) *User {
	return &User{c: c, accounts: accounts, spawn: spawn, r: rand.New(rand.NewPCG(seed, 0x05e1)),
		s: newSession(c), activeTotal: -1, state: -1}
}

// session returns the user's current session.
func (u *User) sess() *session {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.s
}

// me returns the logged-in registered user, or an error naming op.
func (u *User) me(op string) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.account == 0 {
		return 0, fmt.Errorf("%s: not logged in", op)
	}
	return u.account, nil
}

// Account is the registered user the user is logged in as (0 when not).
func (u *User) Account() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.account
}

// Followers are the auctions the user follows.
func (u *User) Followers() []*Follower {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*Follower(nil), u.followers...)
}

// HomePage loads the home page and its static files (the user's browser
// cache answers for files it has, with a conditional GET).
func (u *User) HomePage(ctx context.Context) error {
	s := u.sess()
	for _, p := range []string{"/", "/static/auction.css", "/static/auction.js"} {
		if err := s.static(ctx, u.c, p); err != nil {
			return err
		}
	}
	return nil
}

// Register creates a new registered user (not in Weathervane's mix).
func (u *User) Register(ctx context.Context) error {
	n := u.seq.Add(1)
	body := map[string]any{
		"email":     fmt.Sprintf("new-%d-%d-%d@auction.example", u.r.Uint64(), n, u.r.IntN(1e9)),
		"password":  app.UserPassword,
		"firstName": "New", "lastName": "User" + strconv.FormatUint(n, 10),
		"creditLimit": money(100_000 * int64(10+u.r.IntN(991))),
	}
	var p Profile
	return u.sess().do(ctx, u.c, "POST", "/auction/user", body, "", &p)
}

// Login logs in as a registered user nobody is logged in as.
func (u *User) Login(ctx context.Context) error {
	u.mu.Lock()
	logged := u.account
	u.mu.Unlock()
	if logged != 0 {
		return fmt.Errorf("login: already logged in as user %d", logged)
	}
	id, ok := u.accounts.take()
	if !ok {
		return errNoAccount
	}
	if err := u.LoginAs(ctx, id); err != nil {
		u.accounts.put(id)
		return err
	}
	return nil
}

// LoginAs logs in as registered user id (a test's choice; the chain uses
// Login).
func (u *User) LoginAs(ctx context.Context, id int64) error {
	var r struct {
		UserID int64 `json:"userId"`
	}
	body := map[string]string{"email": app.UserEmail(id), "password": app.UserPassword}
	if err := u.sess().do(ctx, u.c, "POST", "/auction/login", body, "", &r); err != nil {
		return err
	}
	if r.UserID != id {
		return fmt.Errorf("POST /auction/login: logged in as user %d, want %d", r.UserID, id)
	}
	u.mu.Lock()
	u.account = id
	u.mu.Unlock()
	return nil
}

// GetUserProfile reads the user's profile (its credit limit bounds bids).
func (u *User) GetUserProfile(ctx context.Context) error {
	me, err := u.me(OpGetUserProfile)
	if err != nil {
		return err
	}
	var p Profile
	if err := u.sess().do(ctx, u.c, "GET", fmt.Sprintf("/auction/user/%d", me), nil, "", &p); err != nil {
		return err
	}
	u.mu.Lock()
	u.profile = p
	u.mu.Unlock()
	return nil
}

// UpdateUserProfile reads the profile and writes it back changed.
func (u *User) UpdateUserProfile(ctx context.Context) error {
	me, err := u.me(OpUpdateUserProfile)
	if err != nil {
		return err
	}
	path := fmt.Sprintf("/auction/user/%d", me)
	s := u.sess()
	var p Profile
	if err := s.do(ctx, u.c, "GET", path, nil, "", &p); err != nil {
		return err
	}
	body := map[string]any{"firstName": p.FirstName, "lastName": fmt.Sprintf("Updated%d", u.seq.Add(1))}
	if err := s.do(ctx, u.c, "POST", path, body, "", &p); err != nil {
		return err
	}
	u.mu.Lock()
	u.profile = p
	u.mu.Unlock()
	return nil
}

// attending reports whether the user follows auction id (u.mu held).
func (u *User) attending(id int64) bool {
	for _, f := range u.followers {
		if f.auction == id {
			return true
		}
	}
	return false
}

// GetActiveAuctions reads a page of the running auctions. The first time
// it reads page 0 to learn how many there are; then random pages, up to
// four, until one has an auction the user does not follow yet (as
// Weathervane's GetActiveAuctionsOperation).
func (u *User) GetActiveAuctions(ctx context.Context) error {
	if _, err := u.me(OpGetActiveAuctions); err != nil {
		return err
	}
	s := u.sess()
	get := func(p int) error {
		var pg page[Auction]
		if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/live/auction?pageSize=%d&page=%d", PageSize, p), nil, "", &pg); err != nil {
			return err
		}
		if pg.Total == nil {
			return fmt.Errorf("GET /auction/live/auction: no total in the answer")
		}
		u.mu.Lock()
		u.active, u.activeTotal = pg.Items, *pg.Total
		u.mu.Unlock()
		return nil
	}
	u.mu.Lock()
	total := u.activeTotal
	u.mu.Unlock()
	if total < 0 {
		if err := get(0); err != nil {
			return err
		}
	}
	for i := 0; i < 4; i++ {
		u.mu.Lock()
		total = u.activeTotal
		u.mu.Unlock()
		if total == 0 {
			return nil
		}
		pages := int((total + PageSize - 1) / PageSize)
		if err := get(u.r.IntN(pages)); err != nil {
			return err
		}
		u.mu.Lock()
		all := true
		for _, a := range u.active {
			all = all && u.attending(a.ID)
		}
		u.mu.Unlock()
		if !all {
			return nil
		}
	}
	return nil
}

// GetAuctionDetail reads an auction from the page seen last, the first
// page of its items and their thumbnails.
func (u *User) GetAuctionDetail(ctx context.Context) error {
	u.mu.Lock()
	var a Auction
	ok := len(u.active) > 0
	if ok {
		a = u.active[u.r.IntN(len(u.active))]
	}
	u.mu.Unlock()
	if !ok {
		return errors.New("GetAuctionDetail: no auctions seen yet")
	}
	return u.AuctionDetail(ctx, a.ID)
}

// AuctionDetail is GetAuctionDetail of auction id.
func (u *User) AuctionDetail(ctx context.Context, id int64) error {
	s := u.sess()
	var a Auction
	if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/auction/%d", id), nil, "", &a); err != nil {
		return err
	}
	var items page[Item]
	if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/item/auction/%d?pageSize=%d&page=0", id, PageSize), nil, "", &items); err != nil {
		return err
	}
	for _, it := range items.Items {
		if len(it.Images) > 0 {
			if err := s.image(ctx, u.c, it.Images[0].Thumbnail); err != nil {
				return err
			}
		}
	}
	u.mu.Lock()
	u.items = items.Items
	u.mu.Unlock()
	return nil
}

// GetItemDetail reads an item seen last and its images' previews.
func (u *User) GetItemDetail(ctx context.Context) error {
	u.mu.Lock()
	var id int64
	if len(u.items) > 0 {
		id = u.items[u.r.IntN(len(u.items))].ID
	}
	u.mu.Unlock()
	if id == 0 {
		return errors.New("GetItemDetail: no items seen yet")
	}
	return u.ItemDetail(ctx, id)
}

// ItemDetail is GetItemDetail of item id.
func (u *User) ItemDetail(ctx context.Context, id int64) error {
	s := u.sess()
	var it Item
	if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/item/%d", id), nil, "", &it); err != nil {
		return err
	}
	for _, im := range it.Images {
		if err := s.image(ctx, u.c, im.Preview); err != nil {
			return err
		}
	}
	u.mu.Lock()
	u.item = &it
	u.mu.Unlock()
	return nil
}

// GetImageForItem fetches the full size of an image of the item viewed
// last (none when it has no images).
func (u *User) GetImageForItem(ctx context.Context) error {
	u.mu.Lock()
	it := u.item
	u.mu.Unlock()
	if it == nil {
		return errors.New("GetImageForItem: no item viewed yet")
	}
	if len(it.Images) == 0 {
		return nil
	}
	return u.sess().image(ctx, u.c, it.Images[u.r.IntN(len(it.Images))].Full)
}

// JoinAuction joins an auction of the page seen last that the user does not
// follow yet, and starts following it.
func (u *User) JoinAuction(ctx context.Context) error {
	u.mu.Lock()
	var cands []int64
	for _, a := range u.active {
		if !u.attending(a.ID) {
			cands = append(cands, a.ID)
		}
	}
	n := len(u.followers)
	u.mu.Unlock()
	if n >= MaxAttended {
		return fmt.Errorf("JoinAuction: already following %d auctions", n)
	}
	if len(cands) == 0 {
		return errors.New("JoinAuction: no auction to join on the page seen last")
	}
	_, err := u.Join(ctx, cands[u.r.IntN(len(cands))])
	return err
}

// Join is JoinAuction of auction id: it joins, reads the auction, its
// current item, that item's bidding state and image, and returns the new
// follower (also handed to the spawner).
func (u *User) Join(ctx context.Context, id int64) (*Follower, error) {
	if _, err := u.me(OpJoinAuction); err != nil {
		return nil, err
	}
	s := u.sess()
	if err := s.do(ctx, u.c, "POST", "/auction/live/auction", map[string]int64{"auctionId": id}, "", nil); err != nil {
		return nil, err
	}
	var a Auction
	if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/auction/%d", id), nil, "", &a); err != nil {
		return nil, err
	}
	f := newFollower(u, s, id, u.r.Uint64())
	if err := f.current(ctx); err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.followers = append(u.followers, f)
	u.mu.Unlock()
	if u.spawn != nil {
		u.spawn(f)
	}
	return f, nil
}

// LeaveAuction leaves the auction the chain chose and stops following it.
func (u *User) LeaveAuction(ctx context.Context) error {
	u.mu.Lock()
	f := u.leave
	u.mu.Unlock()
	if f == nil {
		return errors.New("LeaveAuction: no auction chosen to leave")
	}
	return u.Leave(ctx, f)
}

// Leave is LeaveAuction of the auction f follows.
func (u *User) Leave(ctx context.Context, f *Follower) error {
	f.stop()
	u.mu.Lock()
	for i, g := range u.followers {
		if g == f {
			u.followers = append(u.followers[:i], u.followers[i+1:]...)
			break
		}
	}
	u.mu.Unlock()
	return u.sess().do(ctx, u.c, "POST", fmt.Sprintf("/auction/live/auction/%d/leave", f.auction), nil, "", nil)
}

// PlaceBid bids on the current item of the auction the chain chose.
func (u *User) PlaceBid(ctx context.Context) error {
	u.mu.Lock()
	f := u.bidOn
	credit := cents(u.profile.CreditLimit)
	u.mu.Unlock()
	if f == nil {
		return errors.New("PlaceBid: no auction chosen to bid in")
	}
	st, ok := f.State()
	if !ok {
		return fmt.Errorf("PlaceBid: no item known in auction %d", f.auction)
	}
	cur := f.high()
	amount := nextBid(u.r, cur, st.Amount == nil)
	amount = min(amount, max(credit, 1), cents(MaxBid))
	_, err := u.Bid(ctx, f, amount)
	return err
}

// nextBid is the amount to bid over cur (cents): cur itself when nobody has
// bid yet (the starting bid), else cur raised by a share from
// normal(BidRaiseMean, BidRaiseSD) clipped to [BidRaiseMin, BidRaiseMax].
func nextBid(r *rand.Rand, cur int64, first bool) int64 {
	if first {
		return cur
	}
	raise := min(max(BidRaiseMean+BidRaiseSD*r.NormFloat64(), BidRaiseMin), BidRaiseMax)
	next := int64(math.Round(float64(cur) * (1 + raise)))
	if next <= cur {
		next = cur + 1
	}
	return next
}

// Bid places a bid of amount cents on the current item f knows. A rejected
// bid (outbid meanwhile, the item closed) is an answer, not a failure.
func (u *User) Bid(ctx context.Context, f *Follower, amount int64) (BidResult, error) {
	var res BidResult
	st, ok := f.State()
	if !ok {
		return res, fmt.Errorf("PlaceBid: no item known in auction %d", f.auction)
	}
	body := map[string]any{"auctionId": f.auction, "itemId": st.ItemID, "amount": money(amount)}
	if err := u.sess().do(ctx, u.c, "POST", "/auction/bid", body, "", &res); err != nil {
		return res, err
	}
	if res.Result != "ACCEPTED" && res.Result != "REJECTED" {
		return res, fmt.Errorf("POST /auction/bid: unexpected result %q", res.Result)
	}
	f.observe(res.Item)
	return res, nil
}

// GetBidHistory reads the first page of the user's bids.
func (u *User) GetBidHistory(ctx context.Context) error {
	return u.history(ctx, OpGetBidHistory, "/auction/bid/user/%d")
}

// GetAttendanceHistory reads the first page of the auctions the user
// attended.
func (u *User) GetAttendanceHistory(ctx context.Context) error {
	return u.history(ctx, OpGetAttendanceHistory, "/auction/attendance/user/%d")
}

// GetPurchaseHistory reads the first page of the user's purchases and their
// thumbnails.
func (u *User) GetPurchaseHistory(ctx context.Context) error {
	me, err := u.me(OpGetPurchaseHistory)
	if err != nil {
		return err
	}
	s := u.sess()
	var pg page[struct {
		Images []Image `json:"images"`
	}]
	if err := s.do(ctx, u.c, "GET", fmt.Sprintf("/auction/item/user/%d/purchased?pageSize=%d&page=0", me, PageSize), nil, "", &pg); err != nil {
		return err
	}
	for _, p := range pg.Items {
		if len(p.Images) > 0 {
			if err := s.image(ctx, u.c, p.Images[0].Thumbnail); err != nil {
				return err
			}
		}
	}
	return nil
}

func (u *User) history(ctx context.Context, op, format string) error {
	me, err := u.me(op)
	if err != nil {
		return err
	}
	var pg page[map[string]any]
	return u.sess().do(ctx, u.c, "GET", fmt.Sprintf(format, me)+fmt.Sprintf("?pageSize=%d&page=0", PageSize), nil, "", &pg)
}

// AddItem offers a new item for a future auction.
func (u *User) AddItem(ctx context.Context) error {
	body := map[string]any{
		"name":         fmt.Sprintf("Item %d of a simulated user", u.seq.Add(1)),
		"description":  "Added by nearnative's auction user model.",
		"manufacturer": "nearnative",
		"condition":    "Good",
		"startingBid":  money(100 * int64(1+u.r.IntN(500))),
	}
	var it Item
	if err := u.sess().do(ctx, u.c, "POST", "/auction/item", body, "", &it); err != nil {
		return err
	}
	u.mu.Lock()
	u.added = it.ID
	u.mu.Unlock()
	return nil
}

// AddImageForItem uploads a picture of the item added last; the
// application stores it in three sizes.
func (u *User) AddImageForItem(ctx context.Context) error {
	u.mu.Lock()
	id := u.added
	u.mu.Unlock()
	if id == 0 {
		return errors.New("AddImageForItem: no item added yet")
	}
	pics := uploads()
	var im Image
	return u.sess().do(ctx, u.c, "POST", fmt.Sprintf("/auction/item/%d/image", id), pics[u.r.IntN(len(pics))], "image/jpeg", &im)
}

// Logout stops following every auction (without leaving them, as
// Weathervane's user does), logs out, gives the registered user back and
// starts a fresh session: the next login is a new visitor.
func (u *User) Logout(ctx context.Context) error {
	_, err := u.me(OpLogout)
	if err != nil {
		return err
	}
	s := u.sess()
	for _, f := range u.Followers() {
		f.stop()
	}
	err = s.do(ctx, u.c, "GET", "/auction/logout", nil, "", nil)
	u.reset()
	return err
}

// reset drops the user's session and state (after logout or a failure).
func (u *User) reset() {
	u.mu.Lock()
	fs := u.followers
	u.followers = nil
	if u.account != 0 {
		u.accounts.put(u.account)
	}
	u.account = 0
	u.s = newSession(u.c)
	u.profile = Profile{}
	u.active, u.activeTotal, u.items, u.item, u.added = nil, -1, nil, nil, 0
	u.bidOn, u.leave = nil, nil
	u.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// Stop ends the user without requests: it stops its followers and gives its
// registered user back (the driver calls it at the end of a run).
func (u *User) Stop() { u.reset() }

var (
	uploadOnce sync.Once
	uploadPics [][]byte
)

// uploads are the pictures AddImageForItem uploads (640x480 JPEGs).
func uploads() [][]byte {
	uploadOnce.Do(func() {
		r := rand.New(rand.NewPCG(7, 7))
		for i := 0; i < 4; i++ {
			img := image.NewRGBA(image.Rect(0, 0, app.FullSize[0], app.FullSize[1]))
			c := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
			for y := 0; y < app.FullSize[1]; y++ {
				for x := 0; x < app.FullSize[0]; x++ {
					img.SetRGBA(x, y, color.RGBA{c.R + uint8(x/8), c.G + uint8(y/8), c.B, 255})
				}
			}
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 75}); err != nil {
				panic(fmt.Sprintf("auction: encoding an upload picture: %v", err))
			}
			uploadPics = append(uploadPics, b.Bytes())
		}
	})
	return uploadPics
}

// Follower is the asynchronous loop that follows one joined auction:
// GetCurrentItem, then GetNextBid long polls until the item closes, then
// the next item (Weathervane's followAuction behaviour).
type Follower struct {
	u       *User
	s       *session // the user's session when it joined
	auction int64
	r       *rand.Rand

	mu     sync.Mutex
	item   *Item
	st     *ItemState
	next   string
	done   bool
	ctx    context.Context
	cancel context.CancelFunc
}

func newFollower(u *User, s *session, auction int64, seed uint64) *Follower {
	ctx, cancel := context.WithCancel(context.Background())
	return &Follower{u: u, s: s, auction: auction, r: rand.New(rand.NewPCG(seed, 0xf011)), next: OpGetCurrentItem, ctx: ctx, cancel: cancel}
}

// AuctionID is the auction followed.
func (f *Follower) AuctionID() int64 { return f.auction }

// State is the bidding state of the current item last seen.
func (f *Follower) State() (ItemState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		return ItemState{}, false
	}
	return *f.st, true
}

// Item is the current item last read.
func (f *Follower) Item() (Item, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.item == nil {
		return Item{}, false
	}
	return *f.item, true
}

// high is the amount to beat in cents: the high bid, or the starting bid.
func (f *Follower) high() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st != nil && f.st.Amount != nil {
		return cents(*f.st.Amount)
	}
	if f.item != nil {
		return cents(f.item.StartingBid)
	}
	return 0
}

// observe takes in a newer state of the followed item.
func (f *Follower) observe(s ItemState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil || s.ItemID != f.st.ItemID || s.Version > f.st.Version {
		f.st = &s
	}
}

func (f *Follower) stop() {
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
	f.cancel()
}

func (f *Follower) stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// GetCurrentItem reads the auction's current item, its bidding state and
// its first image's preview. When the user leaves the auction or logs out
// meanwhile, the operation ends without error.
func (f *Follower) GetCurrentItem(ctx context.Context) error {
	err := f.current(ctx)
	if err != nil && f.stopped() && ctx.Err() == nil {
		return nil
	}
	return err
}

func (f *Follower) current(ctx context.Context) error {
	s := f.s
	var it Item
	if err := s.do(ctx, f.u.c, "GET", fmt.Sprintf("/auction/item/current/auction/%d", f.auction), nil, "", &it); err != nil {
		return err
	}
	var st ItemState
	if err := s.do(ctx, f.u.c, "GET", fmt.Sprintf("/auction/bid/auction/%d/item/%d/count/0", f.auction, it.ID), nil, "", &st); err != nil {
		return err
	}
	if len(it.Images) > 0 {
		if err := s.image(ctx, f.u.c, it.Images[0].Preview); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.item, f.st = &it, &st
	f.mu.Unlock()
	return nil
}

// GetNextBid waits (a long poll) until the current item's state changes
// from the one last seen: a new bid, last call, sold. When the user leaves
// the auction meanwhile, the poll is dropped and the operation ends without
// error.
func (f *Follower) GetNextBid(ctx context.Context) error {
	st, ok := f.State()
	if !ok {
		return fmt.Errorf("GetNextBid: no item known in auction %d", f.auction)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	var next ItemState
	err := f.s.do(pctx, f.u.c, "GET", fmt.Sprintf("/auction/bid/auction/%d/item/%d/count/%d", f.auction, st.ItemID, st.Version), nil, "", &next)
	if err != nil {
		if f.stopped() && ctx.Err() == nil {
			return nil
		}
		return err
	}
	f.observe(next)
	return nil
}
