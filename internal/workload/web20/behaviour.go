package web20

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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
	return c, nil
}

// factory makes the users of one driver process: one Site (with its shared
// keep-alive transport) per instance.
type factory struct {
	cfg   BehaviourConfig
	sites []*Site
	ops   [NumOps]string
}

func newFactory(p map[string]string, dial driver.DialFunc) (driver.Factory, error) {
	c, err := parseBehaviour(p)
	if err != nil {
		return nil, err
	}
	f := &factory{cfg: c}
	for i, op := range Ops {
		f.ops[i] = op.String()
	}
	for _, base := range c.Bases {
		s, err := NewSite(SiteConfig{Base: base, Counts: c.Counts, Users: c.UsersPerInstance,
			ConditionalShare: c.ConditionalShare, AttendChance: c.AttendChance, RequestTimeout: c.RequestTimeout, Dial: dial})
		if err != nil {
			f.Close()
			return nil, err
		}
		f.sites = append(f.sites, s)
	}
	return f, nil
}

// Ops implements driver.Factory.
func (f *factory) Ops() []string { return f.ops[:] }

// Close implements driver.Factory.
func (f *factory) Close() error {
	for _, s := range f.sites {
		s.Close()
	}
	return nil
}

// NewUser implements driver.Factory: user id browses instance id % N, so
// that the users the ramp-up starts in id order fill every instance
// together.
func (f *factory) NewUser(_ context.Context, id int, rng *rand.Rand) (driver.User, error) {
	u := f.sites[id%len(f.sites)].NewUser(id, rng, &f.cfg.Matrix)
	du := &driverUser{u: u}
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
