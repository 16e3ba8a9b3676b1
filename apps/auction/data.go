package auction

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The data per simulated user, from Weathervane's DBLoader defaults
// (perUserScale in vmware/weathervane's dbLoader; apps.md "Weathervane").
const (
	// UsersPerMaxUser registered users exist per simulated user of the
	// maximum (usersScaleFactor).
	UsersPerMaxUser = 5
	// PurchasesPerUser, BidsPerUser and AttendancesPerUser are each
	// registered user's history.
	PurchasesPerUser   = 5
	BidsPerUser        = 100
	AttendancesPerUser = 20
	// UsersPerCurrentAuction: one live auction per 15 simulated users.
	UsersPerCurrentAuction = 15
	// ItemsPerCurrentAuction items are sold in turn in each live auction
	// (an auction out of items starts over with them).
	ItemsPerCurrentAuction = 25
	// MaxImagesPerCurrentItem images, each in three sizes, show a live
	// auction's item.
	MaxImagesPerCurrentItem = 4
	// HistoryItemsPerAuction is ours: Weathervane spreads its history over
	// 730 days of auctions; we group the purchased items 20 to an auction.
	HistoryItemsPerAuction = 20
	// historyDays is how far back the history goes (Weathervane's
	// historyDays).
	historyDays = 730
)

// Image sizes in pixels (width, height); the application scales uploads to
// the same (Images.java).
var (
	ThumbSize   = [2]int{120, 90}
	PreviewSize = [2]int{320, 240}
	FullSize    = [2]int{640, 480}
)

// imagePool is how many distinct pictures per size the generator draws;
// every stored image is one of them (its own row and bytes in the table).
const imagePool = 32

// DataEpoch is the generated history's "now": every generated time lies
// before it, so the data does not depend on when it was made.
var DataEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Size is how much data to generate: enough for MaxUsers simulated users
// at the same time.
type Size struct {
	MaxUsers int
}

// MaxMaxUsers bounds Size.MaxUsers (the history of half a million
// registered users, 250 million bids, is beyond any machine nearnative
// targets).
const MaxMaxUsers = 100_000

// Validate checks the size.
func (s Size) Validate() error {
	if s.MaxUsers < 1 || s.MaxUsers > MaxMaxUsers {
		return fmt.Errorf("auction data: maximum users %d: want 1 to %d", s.MaxUsers, MaxMaxUsers)
	}
	return nil
}

// Name is the size's name in cache keys and logs ("u300").
func (s Size) Name() string { return fmt.Sprintf("u%d", s.MaxUsers) }

// Users is the number of registered users.
func (s Size) Users() int { return UsersPerMaxUser * s.MaxUsers }

// ActiveAuctions is the number of live auctions: ceil(maxUsers/15).
func (s Size) ActiveAuctions() int {
	return (s.MaxUsers + UsersPerCurrentAuction - 1) / UsersPerCurrentAuction
}

// CurrentItems is the number of items of the live auctions.
func (s Size) CurrentItems() int { return s.ActiveAuctions() * ItemsPerCurrentAuction }

// HistoryItems is the number of items sold in past auctions: one per
// purchase.
func (s Size) HistoryItems() int { return s.Users() * PurchasesPerUser }

// HistoryAuctions is the number of past auctions.
func (s Size) HistoryAuctions() int {
	return (s.HistoryItems() + HistoryItemsPerAuction - 1) / HistoryItemsPerAuction
}

// Table is one table's generated rows in the column order of Columns.
type Table struct {
	Name    string
	Columns []string
	// Rows returns a fresh iterator over the rows; it returns nil, nil after
	// the last (the shape of pgx.CopyFromFunc).
	Rows func() func() ([]any, error)
}

// Data is the generated content of the database for one size and seed: the
// same size and seed give the same rows.
type Data struct {
	Size Size
	Seed uint64

	purchaser  []int32   // user id per history item (index = item id - 1)
	losers     [][]int32 // losing bidders per history item, in bid order
	userItems  [][]int32 // history item ids per user (index = user id - 1)
	numImages  []int8    // images per current item
	histStart  []time.Time
	imagePool  [imagePool][3][]byte
	imageCount int
}

// Generate prepares the data of size from seed: the relations every table
// must agree on (who bought and who bid on each history item, how many
// images each live item has, the pictures). The rows themselves are made
// as they are read (Tables).
func Generate(size Size, seed uint64) (*Data, error) {
	if err := size.Validate(); err != nil {
		return nil, err
	}
	d := &Data{Size: size, Seed: seed}
	users := size.Users()
	items := size.HistoryItems()

	// Each user buys PurchasesPerUser history items: item k goes to the
	// k%users'th user of a fresh shuffle per lap over the users.
	r := d.rng(1)
	d.purchaser = make([]int32, items)
	d.userItems = make([][]int32, users)
	perm := make([]int32, users)
	for i := range perm {
		perm[i] = int32(i + 1)
	}
	for k := 0; k < items; k++ {
		if k%users == 0 {
			r.Shuffle(users, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		u := perm[k%users]
		d.purchaser[k] = u
		d.userItems[u-1] = append(d.userItems[u-1], int32(k+1))
	}
	// The rest of each user's BidsPerUser bids lose on history items drawn
	// at random; the purchase is the winning bid.
	d.losers = make([][]int32, items)
	for u := 1; u <= users; u++ {
		for i := 0; i < BidsPerUser-PurchasesPerUser; i++ {
			k := r.IntN(items)
			d.losers[k] = append(d.losers[k], int32(u))
		}
	}
	d.histStart = make([]time.Time, size.HistoryAuctions())
	for a := range d.histStart {
		d.histStart[a] = DataEpoch.Add(-time.Duration(1+r.IntN(historyDays*24*60)) * time.Minute)
	}
	ri := d.rng(2)
	d.numImages = make([]int8, size.CurrentItems())
	for i := range d.numImages {
		d.numImages[i] = int8(1 + ri.IntN(MaxImagesPerCurrentItem))
		d.imageCount += int(d.numImages[i])
	}
	if err := d.makeImages(); err != nil {
		return nil, err
	}
	return d, nil
}

// rng is the generator's random stream number n.
func (d *Data) rng(n uint64) *rand.Rand {
	return rand.New(rand.NewPCG(d.Seed, 0x9e3779b97f4a7c15*n))
}

// Images is the number of stored images (each in three sizes).
func (d *Data) Images() int { return d.imageCount }

// Bids is the number of history bids.
func (d *Data) Bids() int { return d.Size.Users() * BidsPerUser }

// ids of the first live auction and item.
func (d *Data) firstCurrentAuction() int64 { return int64(d.Size.HistoryAuctions()) + 1 }
func (d *Data) firstCurrentItem() int64    { return int64(d.Size.HistoryItems()) + 1 }

// Tables lists the tables in load order.
func (d *Data) Tables() []Table {
	return []Table{
		{"users", []string{"id", "email", "password", "first_name", "last_name", "credit_limit", "logged_in", "created_at", "updated_at"}, d.users},
		{"auction", []string{"id", "name", "category", "auctioneer_id", "state", "current", "start_time", "end_time", "rounds"}, d.auctions},
		{"item", []string{"id", "auction_id", "seq", "seller_id", "name", "description", "manufacturer", "condition", "starting_bid", "state", "high_amount", "high_bidder", "bid_count", "version", "changed_at", "num_images"}, d.items},
		{"bid", []string{"id", "item_id", "auction_id", "bidder_id", "amount", "placed_at", "state"}, d.bids},
		{"purchase", []string{"id", "user_id", "item_id", "auction_id", "price", "purchased_at"}, d.purchases},
		{"attendance", []string{"id", "user_id", "auction_id", "joined_at", "left_at"}, d.attendances},
		{"image", []string{"id", "item_id", "idx", "img_thumb", "img_preview", "img_full"}, d.images},
	}
}

// cents is a numeric(12,2) value.
func cents(c int64) pgtype.Numeric {
	return pgtype.Numeric{Int: big.NewInt(c), Exp: -2, Valid: true}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (d *Data) users() func() ([]any, error) {
	r := d.rng(10)
	n, id := d.Size.Users(), 0
	return func() ([]any, error) {
		if id == n {
			return nil, nil
		}
		id++
		created := DataEpoch.Add(-time.Duration(historyDays*24+r.IntN(365*24)) * time.Hour)
		return []any{int64(id), UserEmail(int64(id)), UserPassword, pick(r, firstNames), pick(r, lastNames),
			cents(100_000 * int64(10+r.IntN(991))), false, created, created}, nil
	}
}

// auctionName is the name of auction id (history and live alike).
func auctionName(r *rand.Rand) string {
	return pick(r, auctionAdjectives) + " " + pick(r, categories) + " Auction"
}

func (d *Data) auctions() func() ([]any, error) {
	r := d.rng(11)
	hist, live := d.Size.HistoryAuctions(), d.Size.ActiveAuctions()
	users := d.Size.Users()
	id := 0
	return func() ([]any, error) {
		if id == hist+live {
			return nil, nil
		}
		id++
		auctioneer := int64(1 + r.IntN(users))
		name, cat := auctionName(r), pick(r, categories)
		if id <= hist {
			start := d.histStart[id-1]
			end := start.Add(time.Duration(HistoryItemsPerAuction*3) * time.Minute)
			return []any{int64(id), name, cat, auctioneer, "COMPLETE", false, start, end, int32(0)}, nil
		}
		return []any{int64(id), name, cat, auctioneer, "PENDING", true, DataEpoch, nil, int32(0)}, nil
	}
}

// startingBid is an item's starting bid in cents: 1 to 500 dollars.
func startingBid(r *rand.Rand) int64 { return 100 * int64(1+r.IntN(500)) }

// bidAmounts returns the amounts of n rising bids from start (cents): each
// 0.5% to 6% above the last, normally around 2% (Weathervane's
// RandomBidStrategy figures).
func bidAmounts(r *rand.Rand, start int64, n int) []int64 {
	out := make([]int64, n)
	cur := start
	for i := range out {
		inc := min(max(0.02+0.02*r.NormFloat64(), 0.005), 0.06)
		next := int64(math.Round(float64(cur) * (1 + inc)))
		if i == 0 {
			next = cur
		} else if next <= cur {
			next = cur + 1
		}
		out[i] = next
		cur = next
	}
	return out
}

// histItem describes history item k (1-based): its auction, position and
// seller, and the amounts of its bids (the last one wins).
type histItem struct {
	id, auction int64
	seq         int32
	start       time.Time
	amounts     []int64
}

func (d *Data) histItem(r *rand.Rand, k int) histItem {
	a := (k-1)/HistoryItemsPerAuction + 1
	seq := (k-1)%HistoryItemsPerAuction + 1
	start := d.histStart[a-1].Add(time.Duration(seq*3) * time.Minute)
	return histItem{id: int64(k), auction: int64(a), seq: int32(seq), start: start,
		amounts: bidAmounts(r, startingBid(r), len(d.losers[k-1])+1)}
}

func (d *Data) items() func() ([]any, error) {
	r := d.rng(12)
	rb := d.rng(20) // shared with bids and purchases: the same amounts
	hist, cur := d.Size.HistoryItems(), d.Size.CurrentItems()
	users := d.Size.Users()
	k := 0
	return func() ([]any, error) {
		if k == hist+cur {
			return nil, nil
		}
		k++
		name := pick(r, itemAdjectives) + " " + pick(r, materials) + " " + pick(r, things)
		desc := fmt.Sprintf("A %s %s in %s condition, from the %s collection.", pick(r, itemAdjectives), pick(r, things), pick(r, conditions), pick(r, lastNames))
		maker, cond := pick(r, manufacturers), pick(r, conditions)
		seller := int64(1 + r.IntN(users))
		if k <= hist {
			h := d.histItem(rb, k)
			win := h.amounts[len(h.amounts)-1]
			sold := h.start.Add(time.Duration(len(h.amounts)*5) * time.Second)
			return []any{h.id, h.auction, h.seq, seller, name, desc, maker, cond, cents(h.amounts[0]), "SOLD",
				cents(win), int64(d.purchaser[k-1]), int32(len(h.amounts)), int32(len(h.amounts) + 2), sold, int32(0)}, nil
		}
		j := k - hist - 1
		auction := d.firstCurrentAuction() + int64(j/ItemsPerCurrentAuction)
		seq := int32(j%ItemsPerCurrentAuction + 1)
		return []any{int64(k), auction, seq, seller, name, desc, maker, cond, cents(startingBid(r)), "PENDING",
			nil, nil, int32(0), int32(0), nil, int32(d.numImages[j])}, nil
	}
}

func (d *Data) bids() func() ([]any, error) {
	rb := d.rng(20)
	hist := d.Size.HistoryItems()
	var h histItem
	k, j := 0, 0 // item, bid within it
	id := int64(0)
	return func() ([]any, error) {
		for k == 0 || j == len(h.amounts) {
			if k == hist {
				return nil, nil
			}
			k++
			h, j = d.histItem(rb, k), 0
		}
		bidder := d.purchaser[k-1]
		if j < len(d.losers[k-1]) {
			bidder = d.losers[k-1][j]
		}
		id++
		row := []any{id, h.id, h.auction, int64(bidder), cents(h.amounts[j]), h.start.Add(time.Duration(j*5) * time.Second), "ACCEPTED"}
		j++
		return row, nil
	}
}

func (d *Data) purchases() func() ([]any, error) {
	rb := d.rng(20)
	hist := d.Size.HistoryItems()
	k := 0
	return func() ([]any, error) {
		if k == hist {
			return nil, nil
		}
		k++
		h := d.histItem(rb, k)
		sold := h.start.Add(time.Duration(len(h.amounts)*5) * time.Second)
		return []any{int64(k), int64(d.purchaser[k-1]), h.id, h.auction, cents(h.amounts[len(h.amounts)-1]), sold}, nil
	}
}

// attendances: each user attended the auctions of their purchases and
// others drawn at random, AttendancesPerUser in all.
func (d *Data) attendances() func() ([]any, error) {
	r := d.rng(13)
	users, hist := d.Size.Users(), d.Size.HistoryAuctions()
	u, i := 1, 0
	id := int64(0)
	return func() ([]any, error) {
		if i == AttendancesPerUser {
			u, i = u+1, 0
		}
		if u > users {
			return nil, nil
		}
		var a int
		if mine := d.userItems[u-1]; i < len(mine) {
			a = (int(mine[i])-1)/HistoryItemsPerAuction + 1
		} else {
			a = 1 + r.IntN(hist)
		}
		i++
		id++
		joined := d.histStart[a-1].Add(time.Duration(r.IntN(HistoryItemsPerAuction*3)) * time.Minute)
		left := joined.Add(time.Duration(5+r.IntN(55)) * time.Minute)
		return []any{id, int64(u), int64(a), joined, left}, nil
	}
}

func (d *Data) images() func() ([]any, error) {
	first := d.firstCurrentItem()
	j, idx := 0, 0
	id := int64(0)
	return func() ([]any, error) {
		for j < len(d.numImages) && idx == int(d.numImages[j]) {
			j, idx = j+1, 0
		}
		if j == len(d.numImages) {
			return nil, nil
		}
		idx++
		id++
		p := d.imagePool[(uint64(id)*0x9e3779b97f4a7c15>>32)%imagePool]
		return []any{id, first + int64(j), int32(idx), p[0], p[1], p[2]}, nil
	}
}

// makeImages draws the picture pool: per picture a background gradient
// and a few shapes, encoded as JPEG in each size.
func (d *Data) makeImages() error {
	r := d.rng(3)
	for i := range d.imagePool {
		c1 := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		c2 := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		type shape struct {
			x, y, rad float64
			c         color.RGBA
			disc      bool
		}
		var shapes []shape
		for s := 0; s < 3+r.IntN(6); s++ {
			shapes = append(shapes, shape{r.Float64(), r.Float64(), 0.05 + 0.2*r.Float64(),
				color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}, r.IntN(2) == 0})
		}
		for s, wh := range [][2]int{ThumbSize, PreviewSize, FullSize} {
			w, h := wh[0], wh[1]
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for y := 0; y < h; y++ {
				fy := float64(y) / float64(h)
				for x := 0; x < w; x++ {
					fx := float64(x) / float64(w)
					t := (fx + fy) / 2
					px := color.RGBA{lerp(c1.R, c2.R, t), lerp(c1.G, c2.G, t), lerp(c1.B, c2.B, t), 255}
					for _, sh := range shapes {
						dx, dy := fx-sh.x, (fy-sh.y)*float64(h)/float64(w)
						if sh.disc && dx*dx+dy*dy < sh.rad*sh.rad || !sh.disc && math.Abs(dx) < sh.rad && math.Abs(dy) < sh.rad/2 {
							px = sh.c
						}
					}
					// A faint texture, so the pictures are not flat drawings.
					n := uint8((x*7 + y*13) % 8)
					px.R, px.G, px.B = px.R^n, px.G^n, px.B^n
					img.SetRGBA(x, y, px)
				}
			}
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 75}); err != nil {
				return fmt.Errorf("encoding a generated picture: %w", err)
			}
			d.imagePool[i][s] = b.Bytes()
		}
	}
	return nil
}

func lerp(a, b uint8, t float64) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*t) }

var (
	firstNames = []string{"Ada", "Alan", "Barbara", "Brian", "Carol", "Dennis", "Edsger", "Frances", "Grace", "Hedy",
		"Ivan", "Jean", "Ken", "Linus", "Margaret", "Niklaus", "Ole", "Radia", "Sophie", "Tim"}
	lastNames = []string{"Lovelace", "Turing", "Liskov", "Kernighan", "Shaw", "Ritchie", "Dijkstra", "Allen", "Hopper",
		"Lamarr", "Sutherland", "Sammet", "Thompson", "Torvalds", "Hamilton", "Wirth", "Dahl", "Perlman", "Wilson", "Berners-Lee"}
	auctionAdjectives = []string{"Spring", "Summer", "Autumn", "Winter", "Estate", "Collector's", "Weekend", "Charity", "Grand", "Midnight"}
	categories        = []string{"Antiques", "Art", "Books", "Cameras", "Clocks", "Coins", "Furniture", "Instruments", "Jewelry", "Maps",
		"Pottery", "Radios", "Stamps", "Tools", "Toys", "Watches", "Weathervanes", "Wine"}
	itemAdjectives = []string{"Vintage", "Antique", "Rare", "Restored", "Hand-made", "Signed", "Early", "Large", "Small", "Unusual"}
	materials      = []string{"Brass", "Copper", "Oak", "Walnut", "Silver", "Porcelain", "Glass", "Iron", "Leather", "Bronze"}
	things         = []string{"Weathervane", "Clock", "Compass", "Lamp", "Chair", "Teapot", "Camera", "Globe", "Radio", "Telescope",
		"Typewriter", "Vase", "Mirror", "Chest", "Barometer"}
	manufacturers = []string{"Acme", "Borealis", "Cartwright & Sons", "Deltron", "Eastwind", "Fairhaven", "Greystone", "Harbor Works"}
	conditions    = []string{"New", "Excellent", "Very Good", "Good", "Fair", "Poor"}
)
