package oltp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nearnative/nearnative/apps/dvdstore"

	"github.com/nearnative/nearnative/internal/driver"
)

// BehaviourName is the load driver's behaviour of DVD Store users, so that
// child driver processes (drivers: N) build the same users.
const BehaviourName = "dvdstore"

// The two clients of the shop.
const (
	ModeHTTP   = "http"
	ModeDirect = "direct"
)

// Parameters of the behaviour (driver.Config.Params).
const (
	ParamMode    = "mode"    // ModeHTTP or ModeDirect
	ParamAddrs   = "addrs"   // each instance's entry (web site or database), host:port, comma-separated
	ParamThreads = "threads" // users per instance
	ParamSize    = "size"    // the dataset the database was loaded with
	ParamScale   = "scale"
	ParamSeed    = "data_seed"
	ParamPctNew  = "pct_new" // share of orders by new customers, percent
)

// Counters the users report (driver.Counter), summed over the steady phase.
const (
	// CountOrders is DVD Store's orders: completed, rolled-back ones
	// included, counted when they end.
	CountOrders          = "orders"
	CountPurchases       = "purchases"
	CountRollbacks       = "rollbacks"
	CountDeadlockRetries = "deadlock_retries"
	CountNewCustomers    = "new_customers"
)

// failurePause keeps a user whose order failed from spinning against a
// server that refuses every request at once.
const failurePause = 50 * time.Millisecond

func init() { driver.Register(BehaviourName, newFactory) }

// BehaviourConfig is what the behaviour's users need; Params turns it into
// the driver's string parameters and parseBehaviour back.
type BehaviourConfig struct {
	Mode    string
	Addrs   []string
	Threads int
	Dataset dvdstore.Dataset
	Order   OrderParams
}

// Params returns c as driver parameters.
func (c BehaviourConfig) Params() map[string]string {
	return map[string]string{
		ParamMode: c.Mode, ParamAddrs: strings.Join(c.Addrs, ","), ParamThreads: strconv.Itoa(c.Threads),
		ParamSize: c.Dataset.Size.Name, ParamScale: strconv.FormatFloat(c.Dataset.Scale, 'g', -1, 64),
		ParamSeed: strconv.FormatUint(c.Dataset.Seed, 10), ParamPctNew: strconv.Itoa(c.Order.PctNewCustomer),
	}
}

// Validate checks the configuration.
func (c BehaviourConfig) Validate() error {
	if c.Mode != ModeHTTP && c.Mode != ModeDirect {
		return fmt.Errorf("dvdstore users: mode %q: want %s or %s", c.Mode, ModeHTTP, ModeDirect)
	}
	if len(c.Addrs) == 0 {
		return errors.New("dvdstore users: no instance address")
	}
	for _, a := range c.Addrs {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("dvdstore users: instance address %q: want host:port", a)
		}
	}
	if c.Threads < 1 {
		return fmt.Errorf("dvdstore users: %d threads per instance: want at least 1", c.Threads)
	}
	if err := c.Dataset.Validate(); err != nil {
		return err
	}
	return c.Order.Validate()
}

func parseBehaviour(p map[string]string) (BehaviourConfig, error) {
	c := BehaviourConfig{Mode: p[ParamMode], Order: DefaultOrder}
	if a := strings.TrimSpace(p[ParamAddrs]); a != "" {
		c.Addrs = strings.Split(a, ",")
	}
	var err error
	if c.Threads, err = strconv.Atoi(p[ParamThreads]); err != nil {
		return c, fmt.Errorf("dvdstore users: threads %q: %w", p[ParamThreads], err)
	}
	size, err := dvdstore.ParseSize(p[ParamSize])
	if err != nil {
		return c, err
	}
	scale, err := strconv.ParseFloat(p[ParamScale], 64)
	if err != nil {
		return c, fmt.Errorf("dvdstore users: scale %q: %w", p[ParamScale], err)
	}
	seed, err := strconv.ParseUint(p[ParamSeed], 10, 64)
	if err != nil {
		return c, fmt.Errorf("dvdstore users: data seed %q: %w", p[ParamSeed], err)
	}
	c.Dataset = dvdstore.Dataset{Size: size, Scale: scale, Seed: seed}
	if s := p[ParamPctNew]; s != "" {
		if c.Order.PctNewCustomer, err = strconv.Atoi(s); err != nil {
			return c, fmt.Errorf("dvdstore users: pct_new %q: %w", s, err)
		}
	}
	return c, c.Validate()
}

// factory makes the users of one driver process. HTTP users share one
// keep-alive transport, with as many idle connections per web server as
// the instance has users.
type factory struct {
	c    BehaviourConfig
	tr   *http.Transport
	dial driver.DialFunc
}

func newFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	c, err := parseBehaviour(p)
	if err != nil {
		return nil, err
	}
	f := &factory{c: c, dial: dial}
	if c.Mode == ModeHTTP {
		f.tr = NewTransport(c.Threads, dial)
	}
	return f, nil
}

// Ops implements driver.Factory.
func (f *factory) Ops() []string { return append([]string(nil), Ops...) }

// Close implements driver.Factory.
func (f *factory) Close() error {
	if f.tr != nil {
		f.tr.CloseIdleConnections()
	}
	return nil
}

// NewUser implements driver.Factory: user id shops at instance id /
// threads, so that the users of an instance are consecutive and a driver
// process serving consecutive users serves whole instances, as the seed's
// one driver per instance.
func (f *factory) NewUser(ctx context.Context, id int, rng *rand.Rand) (driver.User, error) {
	inst := id / f.c.Threads
	if inst >= len(f.c.Addrs) {
		return nil, fmt.Errorf("user %d: instance %d, but only %d instance address(es)", id, inst, len(f.c.Addrs))
	}
	addr := f.c.Addrs[inst]
	var shop Shop
	var err error
	if f.c.Mode == ModeHTTP {
		shop, err = NewHTTPShop(addr, f.tr)
	} else {
		shop, err = NewDirectShop(ctx, addr, pgconn.DialFunc(f.dial))
	}
	if err != nil {
		return nil, err
	}
	t := &Tally{}
	u, err := NewUser(shop, f.c.Dataset, f.c.Order, id, rng.Uint64(), t)
	if err != nil {
		shop.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &driverUser{u: u, tally: t}, nil
}

// driverUser runs a User's order loop under the driver. Each step of an
// order is an operation, followed by the driver's think time (from the
// step's end, DVD Store's think time between transactions); what the
// operations do not show (orders, purchases, rollbacks, deadlock retries)
// goes to the driver's counters.
type driverUser struct {
	u     *User
	tally *Tally
}

// Next implements driver.User; the driver calls Run instead.
func (d *driverUser) Next() (string, driver.Operation) {
	panic("oltp: Next called on a self-paced DVD Store user")
}

// Run implements driver.Runner.
func (d *driverUser) Run(ctx context.Context, rec driver.Recorder, p *driver.Pacer) error {
	counter, _ := rec.(driver.Counter)
	paced := pacedRecorder{rec: rec, p: p}
	for ctx.Err() == nil {
		before := d.tally.Read()
		err := d.u.Order(ctx, paced)
		if counter != nil {
			c := d.tally.Read().Sub(before)
			for name, n := range map[string]int64{CountOrders: c.Orders, CountPurchases: c.Purchases, CountRollbacks: c.Rollbacks,
				CountDeadlockRetries: c.DeadlockRetries, CountNewCustomers: c.NewCustomers} {
				if n > 0 {
					counter.Count(name, n)
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			if sleepCtx(ctx, failurePause) != nil {
				return nil
			}
		}
	}
	return nil
}

// pacedRecorder times each step through the driver's recorder, then
// waits the think time.
type pacedRecorder struct {
	rec driver.Recorder
	p   *driver.Pacer
}

// Do implements Recorder.
func (r pacedRecorder) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	err := r.rec.Do(ctx, op, fn)
	if werr := r.p.Wait(ctx, op, start, time.Now()); werr != nil && err == nil {
		return werr
	}
	return err
}

// Close implements driver.Closer.
func (d *driverUser) Close() error { return d.u.Close(context.Background()) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
