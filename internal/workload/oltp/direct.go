package oltp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/internal/pgserver"
)

// DirectShop is one user's own database session (DVD Store's direct
// drivers hold one connection per thread): the stored functions called
// over pgx, whose statement cache prepares each statement once.
type DirectShop struct {
	conn *pgx.Conn
}

// NewDirectShop connects a user to the shop's database at addr, opening the
// connection with dial (nil: pgx's own, from this machine; the driver gives
// the run's client host's).
func NewDirectShop(ctx context.Context, addr string, dial pgconn.DialFunc) (*DirectShop, error) {
	cfg, err := pgx.ParseConfig(pgserver.DSN(addr, dvdstore.DBName))
	if err != nil {
		return nil, fmt.Errorf("the DVD Store database at %s: %w", addr, err)
	}
	if dial != nil {
		cfg.DialFunc = dial
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the DVD Store database at %s: %w", addr, err)
	}
	return &DirectShop{conn: conn}, nil
}

// Close implements Shop.
func (s *DirectShop) Close(ctx context.Context) error { return s.conn.Close(ctx) }

// pgErr wraps a database error with the call that failed, mapping DVD
// Store's outcomes to ErrRollback and ErrDeadlock.
func pgErr(call string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "DS001":
			return fmt.Errorf("%s: %w (%s)", call, ErrRollback, pe.Message)
		case "40P01":
			return fmt.Errorf("%s: %w (%s)", call, ErrDeadlock, pe.Message)
		}
		return fmt.Errorf("%s: SQLSTATE %s: %s", call, pe.Code, pe.Message)
	}
	return fmt.Errorf("%s: %w", call, err)
}

// NewCustomer implements Shop: new_customer().
func (s *DirectShop) NewCustomer(ctx context.Context, c dvdstore.Customer) (int, error) {
	var state, zip any
	if c.Region == 1 {
		state, zip = c.State, c.Zip
	}
	var id int
	err := s.conn.QueryRow(ctx, `SELECT new_customer($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		c.FirstName, c.LastName, c.Address1, c.Address2, c.City, state, zip, c.Country, c.Region, c.Email, c.Phone,
		c.CreditCardType, c.CreditCard, c.CreditCardExpiration, c.Username, c.Password, c.Age, c.Income, c.Gender).Scan(&id)
	if err != nil {
		return 0, pgErr("new_customer", err)
	}
	if id == 0 {
		return 0, fmt.Errorf("new_customer %s: %w", c.Username, ErrTaken)
	}
	return id, nil
}

// Login implements Shop: login().
func (s *DirectShop) Login(ctx context.Context, username, password string) (int, int, error) {
	rows, err := s.conn.Query(ctx, `SELECT customerid, title FROM login($1, $2)`, username, password)
	if err != nil {
		return 0, 0, pgErr("login", err)
	}
	id, history, n := 0, 0, 0
	for rows.Next() {
		var title *string
		if err := rows.Scan(&id, &title); err != nil {
			rows.Close()
			return 0, 0, pgErr("login", err)
		}
		n++
		if title != nil {
			history++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, pgErr("login", err)
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("login %s: user name or password incorrect", username)
	}
	return id, history, nil
}

// Browse implements Shop: browse_by_category(), browse_by_actor(),
// browse_by_title(), reading every row as the web page does.
func (s *DirectShop) Browse(ctx context.Context, b Browse) (int, error) {
	var sql string
	var arg any = b.Value
	switch b.By {
	case "category":
		sql = `SELECT prod_id, title, actor, price FROM browse_by_category($1::integer, $2)`
	case "actor":
		sql = `SELECT prod_id, title, actor, price FROM browse_by_actor($1, $2)`
	case "title":
		sql = `SELECT prod_id, title, actor, price FROM browse_by_title($1, $2)`
	default:
		return 0, fmt.Errorf("browse by %q: want category, actor or title", b.By)
	}
	rows, err := s.conn.Query(ctx, sql, arg, b.Batch)
	if err != nil {
		return 0, pgErr("browse_by_"+b.By, err)
	}
	n := 0
	for rows.Next() {
		var id int
		var title, actor string
		var price pgtype.Numeric
		if err := rows.Scan(&id, &title, &actor, &price); err != nil {
			rows.Close()
			return 0, pgErr("browse_by_"+b.By, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, pgErr("browse_by_"+b.By, err)
	}
	return n, nil
}

// Prices implements Shop.
func (s *DirectShop) Prices(ctx context.Context, ids []int) (map[int]int, error) {
	rows, err := s.conn.Query(ctx, `SELECT prod_id, price FROM products WHERE prod_id = ANY($1)`, ids)
	if err != nil {
		return nil, pgErr("price lookup", err)
	}
	out := map[int]int{}
	for rows.Next() {
		var id int
		var price float64
		if err := rows.Scan(&id, &price); err != nil {
			rows.Close()
			return nil, pgErr("price lookup", err)
		}
		out[id] = int(math.Round(price * 100))
	}
	if err := rows.Err(); err != nil {
		return nil, pgErr("price lookup", err)
	}
	return out, nil
}

func numeric(c int) pgtype.Numeric {
	return pgtype.Numeric{Int: big.NewInt(int64(c)), Exp: -2, Valid: true}
}

// Purchase implements Shop: purchase().
func (s *DirectShop) Purchase(ctx context.Context, customer, net, tax int, items []Item) (int, error) {
	ids := make([]int32, len(items))
	qty := make([]int32, len(items))
	for i, it := range items {
		ids[i], qty[i] = int32(it.ProdID), int32(it.Quantity)
	}
	var id int
	err := s.conn.QueryRow(ctx, `SELECT purchase($1, $2, $3, $4, $5, $6)`,
		customer, numeric(net), numeric(tax), numeric(net+tax), ids, qty).Scan(&id)
	if err != nil {
		return 0, pgErr("purchase", err)
	}
	return id, nil
}

// DBStats reads pg_stat_database for the shop's database at addr over a
// short-lived connection, for a trial's commits/s and buffer hit ratio: read
// it at the start and the end of the steady period while the users are
// still running, then pgserver.DBStats.Rates. PostgreSQL 15 flushes a busy
// backend's counters at most once a second, so each end is off by up to a
// second's transactions; but an idle backend (a persistent PHP connection
// after the load has stopped) holds them for up to 10 s, so do not read
// after the load without waiting that long or ending those sessions.
// dial opens the connection (nil: from this machine; a server on another
// machine: from its host, deploy.Deployment.Dialers).
func DBStats(ctx context.Context, addr string, dial pgconn.DialFunc) (pgserver.DBStats, error) {
	cfg, err := pgx.ParseConfig(pgserver.DSN(addr, dvdstore.DBName))
	if err != nil {
		return pgserver.DBStats{}, fmt.Errorf("reading database statistics: %w", err)
	}
	if dial != nil {
		cfg.DialFunc = dial
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return pgserver.DBStats{}, fmt.Errorf("reading database statistics: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgserver.ReadDBStats(ctx, conn, dvdstore.DBName)
}
