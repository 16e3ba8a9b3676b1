package web20

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/driver"
)

// Behaviour is the registered name of the Olio users' driver behaviour:
// child driver processes (drivers: N) build the same users from its
// parameters.
const Behaviour = "web20-olio"

func init() { driver.Register(Behaviour, newFactory) }

// Parameters of Behaviour, all strings as a driver plan carries them.
const (
	// ParamBases is every instance's site address, comma-separated
	// (http://host:port each); user id goes to instance id % count.
	ParamBases = "bases"
	// ParamPersons, ParamTags and ParamEvents are the loaded data's counts.
	ParamPersons = "persons"
	ParamTags    = "tags"
	ParamEvents  = "events"
	// ParamUsers is the number of users per instance (it sizes each site's
	// pool of idle connections).
	ParamUsers = "users"
	// ParamMatrix is the Markov chain (FormatMatrix); empty: DefaultMatrix.
	ParamMatrix = "matrix"
	// ParamConditional and ParamAttend are SiteConfig's ConditionalShare
	// and AttendChance; ParamTimeout its RequestTimeout.
	ParamConditional = "conditional"
	ParamAttend      = "attend"
	ParamTimeout     = "timeout"
	// ParamTag is SiteConfig's Tag: it keeps the names the users register
	// unique across the driver runs of one data copy.
	ParamTag = "tag"
	// ParamSession, when set, keeps the users of this driver process from
	// one run to the next under that key (until ReleaseSession): a user of
	// the next run continues its visit where it stopped (its place in the
	// Markov chain, its login, cookies and browser cache), as Weathervane's
	// users do when its findMax search changes the load. Child driver
	// processes live for one run, so with drivers > 0 every run's users
	// start fresh.
	ParamSession = "session"
)

// BehaviourConfig is what the behaviour's parameters say.
type BehaviourConfig struct {
	Bases            []string
	Counts           olio.Counts
	UsersPerInstance int
	Matrix           Matrix
	ConditionalShare float64
	AttendChance     float64
	RequestTimeout   time.Duration
	Tag              string
	Session          string
}

// Params encodes c as the behaviour's parameters.
func (c BehaviourConfig) Params() map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{
		ParamBases:   strings.Join(c.Bases, ","),
		ParamPersons: strconv.Itoa(c.Counts.Persons), ParamTags: strconv.Itoa(c.Counts.Tags), ParamEvents: strconv.Itoa(c.Counts.Events),
		ParamUsers:       strconv.Itoa(c.UsersPerInstance),
		ParamMatrix:      FormatMatrix(c.Matrix),
		ParamConditional: f(c.ConditionalShare), ParamAttend: f(c.AttendChance),
		ParamTimeout: c.RequestTimeout.String(),
		ParamTag:     c.Tag, ParamSession: c.Session,
	}
}

// parseBehaviour reads the behaviour's parameters.
func parseBehaviour(p map[string]string) (BehaviourConfig, error) {
	var c BehaviourConfig
	for _, b := range strings.Split(p[ParamBases], ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Bases = append(c.Bases, b)
		}
	}
	if len(c.Bases) == 0 {
		return c, fmt.Errorf("parameter %s: no site address", ParamBases)
	}
	ints := map[string]*int{ParamPersons: &c.Counts.Persons, ParamTags: &c.Counts.Tags, ParamEvents: &c.Counts.Events, ParamUsers: &c.UsersPerInstance}
	for name, dst := range ints {
		n, err := strconv.Atoi(p[name])
		if err != nil || n < 1 {
			return c, fmt.Errorf("parameter %s %q: want a positive integer", name, p[name])
		}
		*dst = n
	}
	c.Matrix = DefaultMatrix
	if s := p[ParamMatrix]; s != "" {
		m, err := ParseMatrix(s)
		if err != nil {
			return c, fmt.Errorf("parameter %s: %w", ParamMatrix, err)
		}
		c.Matrix = m
	}
	floats := map[string]*float64{ParamConditional: &c.ConditionalShare, ParamAttend: &c.AttendChance}
	for name, dst := range floats {
		if s := p[name]; s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return c, fmt.Errorf("parameter %s %q: want a number", name, s)
			}
			*dst = v
		}
	}
	if s := p[ParamTimeout]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("parameter %s %q: want a positive duration", ParamTimeout, s)
		}
		c.RequestTimeout = d
	}
	c.Tag, c.Session = p[ParamTag], p[ParamSession]
	if strings.ContainsFunc(c.Tag, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) || len(c.Tag) > 8 {
		return c, fmt.Errorf("parameter %s %q: want at most 8 lower-case letters and digits (it goes into user names of at most 25 characters)", ParamTag, c.Tag)
	}
	return c, nil
}

// factory makes the users of one driver process: one Site (with its shared
// keep-alive transport) per instance; in a session it also keeps the users.
type factory struct {
	cfg   BehaviourConfig
	sites []*Site
	ops   [NumOps]string

	mu    sync.Mutex
	users map[int]*driverUser // in a session
}

var (
	sessionsMu sync.Mutex
	sessions   = map[string]*factory{}
)

func newFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	c, err := parseBehaviour(p)
	if err != nil {
		return nil, err
	}
	if c.Session != "" {
		sessionsMu.Lock()
		defer sessionsMu.Unlock()
		if old, ok := sessions[c.Session]; ok {
			if strings.Join(old.cfg.Bases, ",") != strings.Join(c.Bases, ",") || old.cfg.Counts != c.Counts || old.cfg.Matrix != c.Matrix {
				return nil, fmt.Errorf("driver session %s was opened with other sites, data or matrix", c.Session)
			}
			return old, nil
		}
	}
	f := &factory{cfg: c, users: map[int]*driverUser{}}
	for i, op := range Ops {
		f.ops[i] = op.String()
	}
	for _, base := range c.Bases {
		s, err := NewSite(SiteConfig{Base: base, Counts: c.Counts, Users: c.UsersPerInstance,
			ConditionalShare: c.ConditionalShare, AttendChance: c.AttendChance, RequestTimeout: c.RequestTimeout, Tag: c.Tag, Dial: dial})
		if err != nil {
			f.closeSites()
			return nil, err
		}
		f.sites = append(f.sites, s)
	}
	if c.Session != "" {
		sessions[c.Session] = f
	}
	return f, nil
}

// ReleaseSession ends a session: its users are dropped and its sites'
// idle connections closed. Releasing an unknown session does nothing.
func ReleaseSession(key string) {
	sessionsMu.Lock()
	f, ok := sessions[key]
	delete(sessions, key)
	sessionsMu.Unlock()
	if !ok {
		return
	}
	f.mu.Lock()
	f.users = nil
	f.mu.Unlock()
	f.closeSites()
}

// Ops implements driver.Factory.
func (f *factory) Ops() []string { return f.ops[:] }

// Close implements driver.Factory: a session's sites stay open until
// ReleaseSession.
func (f *factory) Close() error {
	if f.cfg.Session == "" {
		f.closeSites()
	}
	return nil
}

func (f *factory) closeSites() {
	for _, s := range f.sites {
		s.Close()
	}
}

// NewUser implements driver.Factory: user id browses instance id % N, so
// that the users the ramp-up starts in id order fill every instance
// together. In a session, the user of an earlier run with that id comes
// back as it was (and rng is not used).
func (f *factory) NewUser(_ context.Context, id int, rng *rand.Rand) (driver.User, error) {
	if f.cfg.Session != "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		if u, ok := f.users[id]; ok {
			return u, nil
		}
	}
	u := f.sites[id%len(f.sites)].NewUser(id, rng, &f.cfg.Matrix)
	du := &driverUser{u: u}
	if f.cfg.Session != "" && f.users != nil {
		f.users[id] = du
	}
	for _, op := range Ops {
		fn := u.op(op)
		du.fns[op] = func(ctx context.Context) error {
			if err := fn(ctx); err != nil {
				// Failures are counted by the cause the request gave:
				// "HTTP 500", "PHP error", "transport", ...
				return driver.Failure(Cause(err), err)
			}
			return nil
		}
	}
	return du, nil
}

// driverUser is a User as the driver runs it: the driver times each
// operation from the call to the return (the first request sent to the
// last answer read) and paces the user.
type driverUser struct {
	u   *User
	fns [NumOps]driver.Operation
}

// Next implements driver.User.
func (d *driverUser) Next() (string, driver.Operation) {
	op := d.u.Next()
	return opNames[op], d.fns[op]
}

// FormatMatrix writes a matrix as ParseMatrix reads it: rows separated by
// ";", percentages by ",".
func FormatMatrix(m Matrix) string {
	rows := make([]string, NumOps)
	for i, row := range m {
		cols := make([]string, NumOps)
		for j, v := range row {
			cols[j] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		rows[i] = strings.Join(cols, ",")
	}
	return strings.Join(rows, ";")
}

// ParseMatrix reads a Markov chain: seven rows separated by ";" (HomePage,
// Login, TagSearch, EventDetail, PersonDetail, AddPerson, AddEvent), each
// seven percentages separated by "," in the same order. Every row must sum
// to 100.
func ParseMatrix(s string) (Matrix, error) {
	var m Matrix
	rows := strings.Split(strings.TrimSpace(s), ";")
	if len(rows) != NumOps {
		return m, fmt.Errorf("%d rows, want %d separated by \";\" (%s)", len(rows), NumOps, strings.Join(opNames[:], ", "))
	}
	for i, row := range rows {
		v, err := parsePercents(row)
		if err != nil {
			return m, fmt.Errorf("row %s: %w", Op(i), err)
		}
		m[i] = v
	}
	return m, m.Validate()
}

// FormatMix writes a mix as ParseMix reads it.
func FormatMix(x Mix) string {
	cols := make([]string, NumOps)
	for i, v := range x {
		cols[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(cols, ",")
}

// ParseMix reads a mix: seven percentages separated by "," (HomePage,
// Login, TagSearch, EventDetail, PersonDetail, AddPerson, AddEvent) that
// sum to 100.
func ParseMix(s string) (Mix, error) {
	v, err := parsePercents(s)
	if err != nil {
		return Mix{}, err
	}
	x := Mix(v)
	return x, x.Validate()
}

func parsePercents(s string) ([NumOps]float64, error) {
	var out [NumOps]float64
	cols := strings.Split(strings.TrimSpace(s), ",")
	if len(cols) != NumOps {
		return out, fmt.Errorf("%d values, want %d percentages separated by \",\" (%s)", len(cols), NumOps, strings.Join(opNames[:], ", "))
	}
	for i, c := range cols {
		v, err := strconv.ParseFloat(strings.TrimSpace(c), 64)
		if err != nil {
			return out, fmt.Errorf("%s: %q is not a number", Op(i), strings.TrimSpace(c))
		}
		out[i] = v
	}
	return out, nil
}
