package oltp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/dvdstore"
)

// countingRecorder runs each operation and counts it, its failures and its
// time: the trivial Recorder of the tests.
type countingRecorder struct {
	mu       sync.Mutex
	ops      map[string]int
	failures map[string]int
	time     map[string]time.Duration
	sequence []string
}

func newRecorder() *countingRecorder {
	return &countingRecorder{ops: map[string]int{}, failures: map[string]int{}, time: map[string]time.Duration{}}
}

func (r *countingRecorder) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[op]++
	r.time[op] += time.Since(start)
	r.sequence = append(r.sequence, op)
	if err != nil {
		r.failures[op]++
	}
	return err
}

// fakeShop answers like the real shop from the generator's data, and can
// be told to deadlock, roll back or fail.
type fakeShop struct {
	d          dvdstore.Dataset
	deadlocks  int // purchases to fail with ErrDeadlock first
	rollback   bool
	failBrowse bool
	taken      int // registrations to refuse first
	purchases  []fakePurchase
	browses    []Browse
	logins     []string
	nextID     int
}

type fakePurchase struct {
	customer, net, tax int
	items              []Item
}

func (f *fakeShop) NewCustomer(_ context.Context, c dvdstore.Customer) (int, error) {
	if f.taken > 0 {
		f.taken--
		return 0, fmt.Errorf("fake: %w", ErrTaken)
	}
	f.nextID++
	return f.d.Counts().Customers + f.nextID, nil
}

func (f *fakeShop) Login(_ context.Context, user, pw string) (int, int, error) {
	f.logins = append(f.logins, user)
	var id int
	if _, err := fmt.Sscanf(user, "user%d", &id); err != nil || pw != dvdstore.Password {
		return 0, 0, errors.New("fake: bad login")
	}
	return id, 0, nil
}

func (f *fakeShop) Browse(_ context.Context, b Browse) (int, error) {
	if f.failBrowse {
		return 0, errors.New("fake: browse failed")
	}
	f.browses = append(f.browses, b)
	return min(b.Batch, 2), nil
}

func (f *fakeShop) Prices(_ context.Context, ids []int) (map[int]int, error) {
	m := map[int]int{}
	for _, id := range ids {
		m[id] = f.d.PriceCents(id)
	}
	return m, nil
}

func (f *fakeShop) Purchase(_ context.Context, customer, net, tax int, items []Item) (int, error) {
	if f.deadlocks > 0 {
		f.deadlocks--
		return 0, fmt.Errorf("fake: %w", ErrDeadlock)
	}
	if f.rollback {
		return 0, fmt.Errorf("fake: %w", ErrRollback)
	}
	f.purchases = append(f.purchases, fakePurchase{customer, net, tax, append([]Item(nil), items...)})
	return len(f.purchases), nil
}

func (f *fakeShop) Close(context.Context) error { return nil }

func dataset(t testing.TB) dvdstore.Dataset {
	s, err := dvdstore.ParseSize("10mb")
	if err != nil {
		t.Fatal(err)
	}
	return dvdstore.Dataset{Size: s, Scale: 1, Seed: 1}
}

// TestOrderLoopDistribution runs many orders against the fake shop and
// checks the choices against DVD Store's loop.
func TestOrderLoopDistribution(t *testing.T) {
	d := dataset(t)
	shop := &fakeShop{d: d}
	tally := &Tally{}
	u, err := NewUser(shop, d, DefaultOrder, 1, 42, tally)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	const orders = 4000
	lines, lineMin, lineMax, qMin, qMax := 0, 99, 0, 99, 0
	for i := 0; i < orders; i++ {
		if err := u.Order(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		p := shop.purchases[len(shop.purchases)-1]
		lines += len(p.items)
		lineMin, lineMax = min(lineMin, len(p.items)), max(lineMax, len(p.items))
		net := 0
		for _, it := range p.items {
			qMin, qMax = min(qMin, it.Quantity), max(qMax, it.Quantity)
			net += it.Quantity * d.PriceCents(it.ProdID)
		}
		if p.net != net || p.tax != dvdstore.TaxCents(net) {
			t.Fatalf("order %d: net %d tax %d, want %d %d", i, p.net, p.tax, net, dvdstore.TaxCents(net))
		}
		if p.customer < 1 {
			t.Fatalf("order %d bought for customer %d", i, p.customer)
		}
	}
	c := tally.Read()
	if c.Orders != orders || c.Purchases != orders || c.Rollbacks != 0 || c.NewCustomers+c.Logins != orders {
		t.Errorf("tally %+v", c)
	}
	if pct := 100 * float64(c.NewCustomers) / orders; math.Abs(pct-20) > 2 {
		t.Errorf("%.1f%% new customers, want 20%%", pct)
	}
	searches := float64(len(shop.browses)) / orders
	if math.Abs(searches-3) > 0.1 {
		t.Errorf("%.2f searches per order, want 3", searches)
	}
	byKind := map[string]int{}
	bMin, bMax := 99, 0
	for _, b := range shop.browses {
		byKind[b.By]++
		bMin, bMax = min(bMin, b.Batch), max(bMax, b.Batch)
		if b.By == "category" && (b.Value < "1" || len(b.Value) > 2) {
			t.Errorf("category %q", b.Value)
		}
		if b.By != "category" && len(strings.Fields(b.Value)) != 2 {
			t.Errorf("search by %s for %q: want two words", b.By, b.Value)
		}
	}
	for _, k := range []string{"category", "actor", "title"} {
		if share := float64(byKind[k]) / float64(len(shop.browses)); math.Abs(share-1.0/3) > 0.03 {
			t.Errorf("%s searches %.3f of all, want 1/3", k, share)
		}
	}
	if bMin != 1 || bMax != 9 || lineMin != 1 || lineMax != 9 || qMin != 1 || qMax != 3 {
		t.Errorf("ranges: batch %d..%d lines %d..%d quantity %d..%d, want 1..9 1..9 1..3", bMin, bMax, lineMin, lineMax, qMin, qMax)
	}
	if mean := float64(lines) / orders; math.Abs(mean-5) > 0.15 {
		t.Errorf("%.2f lines per order, want 5", mean)
	}
	// The operations recorded match the expected mix.
	total := 0
	for _, n := range rec.ops {
		total += n
	}
	for op, want := range DefaultOrder.ExpectedMix() {
		if got := float64(rec.ops[op]) / float64(total); math.Abs(got-want) > 0.01 {
			t.Errorf("%s: %.3f of operations, want %.3f", op, got, want)
		}
	}
	if rec.sequence[0] != OpLogin && rec.sequence[0] != OpNewCustomer || rec.sequence[len(rec.sequence)-1] != OpPurchase {
		t.Errorf("an order starts with %s and ends with %s", rec.sequence[0], rec.sequence[len(rec.sequence)-1])
	}

	// The same seed and user number make the same choices.
	shop2 := &fakeShop{d: d}
	u2, _ := NewUser(shop2, d, DefaultOrder, 1, 42, nil)
	for i := 0; i < 50; i++ {
		if err := u2.Order(context.Background(), newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(shop2.browses) != fmt.Sprint(shop.browses[:len(shop2.browses)]) || fmt.Sprint(shop2.logins) != fmt.Sprint(shop.logins[:len(shop2.logins)]) {
		t.Error("two users with the same seed and number chose differently")
	}
}

func TestOrderOutcomes(t *testing.T) {
	d := dataset(t)
	tests := []struct {
		name      string
		shop      *fakeShop
		params    func(*OrderParams)
		wantErr   string
		rollbacks int64
		retries   int64
		orders    int64
	}{
		{"rollback completes the order", &fakeShop{rollback: true}, nil, "", 1, 0, 1},
		{"deadlock retried", &fakeShop{deadlocks: 2}, nil, "", 0, 2, 1},
		{"deadlock retries exhausted", &fakeShop{deadlocks: 5}, func(p *OrderParams) { p.DeadlockRetries = 3 }, "deadlock retries exhausted (3)", 0, 3, 0},
		{"browse failure ends the order", &fakeShop{failBrowse: true}, nil, "fake: browse failed", 0, 0, 0},
		{"taken user names", &fakeShop{taken: 2}, func(p *OrderParams) { p.PctNewCustomer = 100 }, "", 0, 0, 1},
		{"taken three times", &fakeShop{taken: 3}, func(p *OrderParams) { p.PctNewCustomer = 100 }, "user name taken", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultOrder
			p.DeadlockWait = time.Millisecond
			if tt.params != nil {
				tt.params(&p)
			}
			tt.shop.d = d
			tally := &Tally{}
			u, err := NewUser(tt.shop, d, p, 3, 1, tally)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			err = u.Order(context.Background(), rec)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Order = %v, want %q", err, tt.wantErr)
			}
			c := tally.Read()
			if c.Rollbacks != tt.rollbacks || c.DeadlockRetries != tt.retries || c.Orders != tt.orders {
				t.Errorf("tally %+v, want %d rollbacks, %d retries, %d orders", c, tt.rollbacks, tt.retries, tt.orders)
			}
			if strings.Contains(tt.wantErr, "exhausted") {
				var c interface{ Cause() string }
				if !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, ErrDeadlock) || !errors.As(err, &c) || c.Cause() != CauseRetriesExhausted {
					t.Errorf("exhausted retries: %v is not ErrRetriesExhausted and ErrDeadlock with cause %q", err, CauseRetriesExhausted)
				}
			}
			if tt.wantErr != "" {
				failed := 0
				for _, n := range rec.failures {
					failed += n
				}
				if failed != 1 {
					t.Errorf("%d failed operations recorded, want 1", failed)
				}
			}
			if _, rolled := u.LastOrder(); rolled != (tt.rollbacks > 0) {
				t.Errorf("LastOrder rolled back = %v", rolled)
			}
		})
	}
}

func TestOrderParamsValidate(t *testing.T) {
	if err := DefaultOrder.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*OrderParams){
		"pct":      func(p *OrderParams) { p.PctNewCustomer = 101 },
		"search":   func(p *OrderParams) { p.SearchMean = 0 },
		"lines":    func(p *OrderParams) { p.MaxLines = 11 },
		"quantity": func(p *OrderParams) { p.MaxQuantity = 0 },
		"think":    func(p *OrderParams) { p.Think = -1 },
		"retries":  func(p *OrderParams) { p.DeadlockRetries = -1 },
	} {
		p := DefaultOrder
		mod(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := NewUser(&fakeShop{}, dataset(t), p, 1, 1, nil); err == nil {
			t.Errorf("%s: NewUser accepted it", name)
		}
	}
}

func TestExpectedMixAndOPM(t *testing.T) {
	mix := DefaultOrder.ExpectedMix()
	want := map[string]float64{OpLogin: 0.16, OpNewCustomer: 0.04, OpBrowse: 0.6, OpPurchase: 0.2}
	sum := 0.0
	for op, w := range want {
		if math.Abs(mix[op]-w) > 1e-9 {
			t.Errorf("%s: %v, want %v", op, mix[op], w)
		}
		sum += mix[op]
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("mix sums to %v", sum)
	}
	for _, tt := range []struct {
		orders int64
		d      time.Duration
		want   float64
	}{{100, time.Minute, 100}, {101, 2 * time.Minute, 50}, {7, 3 * time.Second, 140}, {5, 0, 0}} {
		if got := OPM(tt.orders, tt.d); got != tt.want {
			t.Errorf("OPM(%d, %v) = %v, want %v", tt.orders, tt.d, got, tt.want)
		}
	}
}

func TestCounts(t *testing.T) {
	a := Counts{Orders: 10, Rollbacks: 1, Purchases: 10, DeadlockRetries: 2, Browses: 30}
	b := Counts{Orders: 110, Rollbacks: 3, Purchases: 110, DeadlockRetries: 2, Browses: 330}
	d := b.Sub(a)
	if d.Orders != 100 || d.Rollbacks != 2 || d.Browses != 300 || d.RollbackPct() != 2 {
		t.Errorf("Sub = %+v, rollbacks %v%%", d, d.RollbackPct())
	}
	if (Counts{}).RollbackPct() != 0 {
		t.Error("rollback % of no purchase")
	}
}

func TestThinkTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	if DefaultOrder.ThinkTime(r) != 0 {
		t.Error("default think time is not 0")
	}
	p := DefaultOrder
	p.Think = 100 * time.Millisecond
	var sum time.Duration
	for i := 0; i < 10000; i++ {
		d := p.ThinkTime(r)
		if d < 0 || d >= 200*time.Millisecond {
			t.Fatalf("think time %v outside [0, 200ms)", d)
		}
		sum += d
	}
	if mean := sum / 10000; mean < 95*time.Millisecond || mean > 105*time.Millisecond {
		t.Errorf("mean think time %v, want 100ms", mean)
	}
}
