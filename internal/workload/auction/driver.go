package auction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
)

// Behaviour is the registered name of the auction's simulated users on the
// load driver, so that child driver processes (drivers: N) build the same
// users from a plan that names it.
const Behaviour = "auction-user"

func init() { driver.Register(Behaviour, newFactory) }

// Parameters of Behaviour.
const (
	// ParamAddr is nginx's host:port as the driver reaches it (required).
	ParamAddr = "addr"
	// ParamMaxUsers is the most simulated users any run of the session may
	// have (required): user i logs in as the registered users i+1,
	// i+1+max, i+1+2 max, ..., a share of its own whatever a run's count.
	ParamMaxUsers = "max_users"
	// ParamRegistered is the number of registered users in the data
	// (required, UsersPerMaxUser per simulated user of the data's size).
	ParamRegistered = "registered"
	// ParamSession, when set, keeps the users of this driver process from
	// one run to the next under that key (until ReleaseSession): a user of
	// the next run continues its visit, logged in and following its
	// auctions, as Weathervane's users do when findMax changes the load.
	// Child driver processes live for one run, so with drivers > 0 every
	// run's users start fresh.
	ParamSession = "session"
)

// Pacing is the driver's pacing of every loop of a user: Weathervane's
// cycle time (Cycle), from the previous operation's start.
var Pacing = driver.Pacing{Mode: driver.Cycle, Delay: driver.Distribution{
	Kind: driver.NormalClips, Mean: Cycle.Mean, SD: Cycle.SD, Min: Cycle.Min, Max: Cycle.Max}}

// factory holds what the users of one driver process share: the HTTP
// transport to nginx, and in a session the users themselves.
type factory struct {
	c                    *Client
	maxUsers, registered int
	session              string

	mu    sync.Mutex
	users map[int]*simUser
}

var (
	sessionsMu sync.Mutex
	sessions   = map[string]*factory{}
)

func newFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	addr := p[ParamAddr]
	if h, port, err := net.SplitHostPort(addr); err != nil || h == "" || port == "" {
		return nil, fmt.Errorf("parameter %s %q: want nginx's host:port", ParamAddr, addr)
	}
	f := &factory{session: p[ParamSession], users: map[int]*simUser{}}
	for _, x := range []struct {
		name string
		v    *int
	}{{ParamMaxUsers, &f.maxUsers}, {ParamRegistered, &f.registered}} {
		n, err := strconv.Atoi(p[x.name])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("parameter %s %q: want a positive count", x.name, p[x.name])
		}
		*x.v = n
	}
	if f.registered < f.maxUsers {
		return nil, fmt.Errorf("%d simulated users need at least as many registered users, the data has %d", f.maxUsers, f.registered)
	}
	if f.session == "" {
		f.c = NewClient(addr, dial)
		return f, nil
	}
	sessionsMu.Lock()
	defer sessionsMu.Unlock()
	if old, ok := sessions[f.session]; ok {
		if old.c.base != "http://"+addr || old.maxUsers != f.maxUsers || old.registered != f.registered {
			return nil, fmt.Errorf("driver session %s was opened with other parameters", f.session)
		}
		return old, nil
	}
	f.c = NewClient(addr, dial)
	sessions[f.session] = f
	return f, nil
}

// ReleaseSession ends a session's users (without requests: each gives its
// registered user back) and drops their connections.
func ReleaseSession(key string) {
	sessionsMu.Lock()
	f, ok := sessions[key]
	delete(sessions, key)
	sessionsMu.Unlock()
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.users {
		if u.user != nil {
			u.user.Stop()
		}
	}
	f.users = nil
	f.c.Close()
}

// Ops lists every operation the users perform.
func (f *factory) Ops() []string {
	ops := make([]string, 0, len(Ops))
	for _, o := range Ops {
		ops = append(ops, o.Name)
	}
	return ops
}

// Close drops the idle connections of a factory outside a session; a
// session's stay open until ReleaseSession.
func (f *factory) Close() error {
	if f.session == "" {
		f.c.Close()
	}
	return nil
}

// NewUser returns simulated user id, who logs in as the registered users
// id+1, id+1+max_users, ... (a disjoint share of them each, so that users
// in different driver processes or runs never log in as the same
// registered user). In a session, the user of an earlier run with that id
// comes back as it was.
func (f *factory) NewUser(_ context.Context, id int, rng *rand.Rand) (driver.User, error) {
	if id < 0 || id >= f.maxUsers {
		return nil, fmt.Errorf("user %d: the session allows %d", id, f.maxUsers)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.users[id]; ok && f.session != "" {
		return u, nil
	}
	var ids []int64
	for r := id + 1; r <= f.registered; r += f.maxUsers {
		ids = append(ids, int64(r))
	}
	u := &simUser{f: f, accounts: NewAccountsOf(ids, rng.Uint64()), seed: rng.Uint64()}
	f.users[id] = u
	return u, nil
}

// simUser is one simulated user on the driver: its main Markov chain and
// the follower of each auction it joins, each a loop in a goroutine of its
// own, paced by the driver's pacer. It runs itself (driver.Runner).
type simUser struct {
	f        *factory
	accounts *Accounts
	seed     uint64

	user  *User
	spawn func(Loop) // the current run's
}

// Next is never called: the driver runs a Runner through Run.
func (u *simUser) Next() (string, driver.Operation) {
	return OpNoOperation, func(context.Context) error { return nil }
}

// Run implements driver.Runner: it runs the user's main loop and every
// follower it spawns until ctx ends. A user of a session resumes its visit
// (the followers of the auctions it follows start again with
// GetCurrentItem) and keeps it at the end; outside a session the user is
// stopped at the end (without requests: its registered user goes back to
// the pool).
func (u *simUser) Run(ctx context.Context, rec driver.Recorder, p *driver.Pacer) error {
	var wg sync.WaitGroup
	loop := func(l Loop) {
		for ctx.Err() == nil {
			r := &named{rec: rec}
			started := time.Now()
			more, _ := l.Step(ctx, r)
			if !more || ctx.Err() != nil {
				return
			}
			if p.Wait(ctx, r.op, started, time.Now()) != nil {
				return
			}
		}
	}
	u.spawn = func(l Loop) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(l)
		}()
	}
	if u.user == nil {
		u.user = NewUser(u.f.c, u.accounts, u.seed, func(l Loop) { u.spawn(l) })
	} else {
		for _, f := range u.user.Followers() {
			u.spawn(f)
		}
	}
	loop(u.user)
	wg.Wait()
	if u.f.session == "" {
		u.user.Stop()
	}
	return nil
}

// named records through the driver and keeps the name of the operation a
// step ran, for the pacer's per-operation rules.
type named struct {
	rec driver.Recorder
	op  string
}

func (n *named) Do(ctx context.Context, op string, fn func(context.Context) error) error {
	n.op = op
	return n.rec.Do(ctx, op, fn)
}
