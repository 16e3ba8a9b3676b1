package oltp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nearnative/nearnative/apps/dvdstore/dvdstoretest"
	"github.com/nearnative/nearnative/internal/testenv"
)

// TestMain also makes the test binary a child driver process
// (testenv.UseTestDrivers) and the supervisor of container-per-instance
// containers (it is bind-mounted into them).
func TestMain(m *testing.M) { testenv.Main(m, dvdstoretest.Teardown) }

// shops makes a user's Shop in each mode against the stack.
func shops(t *testing.T, s *dvdstoretest.Stack) map[string]func() Shop {
	tr := NewTransport(8, nil)
	t.Cleanup(tr.CloseIdleConnections)
	return map[string]func() Shop{
		"http": func() Shop {
			sh, err := NewHTTPShop(s.WebAddr, tr)
			if err != nil {
				t.Fatal(err)
			}
			return sh
		},
		"direct": func() Shop {
			sh, err := NewDirectShop(context.Background(), s.DBAddr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sh.Close(context.Background()) })
			return sh
		},
	}
}

// TestOrdersBothModes runs DVD Store orders with four concurrent users in
// each mode against the real stack (Apache + mod_php + PostgreSQL started
// natively) and checks the counts against the database.
func TestOrdersBothModes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and Apache")
	}
	s := dvdstoretest.Start(t, dvdstoretest.Options{Web: true, Workers: 6})
	d := dvdstoretest.Dataset()
	c := s.Conn(t)
	ctx := context.Background()
	for _, mode := range []string{"direct", "http"} {
		t.Run(mode, func(t *testing.T) {
			newShop := shops(t, s)[mode]
			var ordersBefore, custBefore int
			if err := c.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM customers)").Scan(&ordersBefore, &custBefore); err != nil {
				t.Fatal(err)
			}
			before, err := DBStats(ctx, s.DBAddr, nil)
			if err != nil {
				t.Fatal(err)
			}
			const users, perUser = 4, 8
			tally := &Tally{}
			rec := newRecorder()
			var wg sync.WaitGroup
			errs := make(chan error, users)
			start := time.Now()
			var all []*User
			for i := 0; i < users; i++ {
				u, err := NewUser(newShop(), d, DefaultOrder, i, 7, tally)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, u)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < perUser; j++ {
						if err := u.Order(ctx, rec); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			for _, u := range all {
				if err := u.Close(ctx); err != nil {
					t.Error(err)
				}
			}
			close(errs)
			for err := range errs {
				t.Errorf("order: %v", err)
			}
			n := tally.Read()
			if n.Orders != users*perUser || n.Purchases != n.Orders || n.Logins+n.NewCustomers != n.Orders {
				t.Errorf("tally %+v, want %d orders", n, users*perUser)
			}
			if rec.ops[OpPurchase] != users*perUser || rec.ops[OpBrowse] != int(n.Browses) || len(rec.failures) != 0 {
				t.Errorf("recorded %v, failures %v", rec.ops, rec.failures)
			}
			if n.Items == 0 {
				t.Error("no browse found anything")
			}
			var ordersAfter, custAfter int
			if err := c.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM customers)").Scan(&ordersAfter, &custAfter); err != nil {
				t.Fatal(err)
			}
			if got, want := int64(ordersAfter-ordersBefore), n.Purchases-n.Rollbacks; got != want {
				t.Errorf("%d orders stored, want %d purchases - %d rollbacks", got, n.Purchases, n.Rollbacks)
			}
			if got := int64(custAfter - custBefore); got != n.NewCustomers {
				t.Errorf("%d customers registered, tally says %d", got, n.NewCustomers)
			}
			// An idle backend flushes its counters to pg_stat_database only
			// after 10 s (PostgreSQL 15); one that exits flushes at once. The
			// direct users' sessions are closed above; Apache's persistent
			// ones end with Apache (http runs last).
			if mode == "http" {
				if err := s.Web.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second)
			after, err := DBStats(ctx, s.DBAddr, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := before.Rates(after)
			if err != nil {
				t.Fatal(err)
			}
			commits := after.Commits - before.Commits
			if commits < int64(rec.ops[OpPurchase]) || r.HitRatio < 0.5 || r.HitRatio > 1 {
				t.Errorf("pg_stat_database: %d commits for %d purchases, hit ratio %.3f", commits, rec.ops[OpPurchase], r.HitRatio)
			}
			var mean []string
			for _, op := range Ops {
				if k := rec.ops[op]; k > 0 {
					mean = append(mean, fmt.Sprintf("%s %d x %.1f ms", op, k, float64(rec.time[op].Microseconds())/1000/float64(k)))
				}
			}
			t.Logf("%s: %d orders by %d users in %v (%.0f OPM on this busy machine), %d rollbacks, %d deadlock retries, %d items found; %s; %d commits, hit ratio %.4f",
				mode, n.Orders, users, elapsed.Round(time.Millisecond), OPM(n.Orders, elapsed), n.Rollbacks, n.DeadlockRetries, n.Items,
				strings.Join(mean, ", "), commits, r.HitRatio)
		})
	}
}

// TestShopOutcomes checks, in both modes, that a purchase beyond stock is
// ErrRollback, a real deadlock is ErrDeadlock, a bad login and a taken user
// name are recognised, and the lookups agree with the data.
func TestShopOutcomes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and Apache")
	}
	s := dvdstoretest.Start(t, dvdstoretest.Options{Web: true})
	d := dvdstoretest.Dataset()
	c := s.Conn(t)
	ctx := context.Background()
	var short int
	if err := c.QueryRow(ctx, "SELECT prod_id FROM inventory WHERE quan_in_stock = 0 ORDER BY prod_id LIMIT 1").Scan(&short); err != nil {
		t.Fatal(err)
	}
	for mode, newShop := range shops(t, s) {
		t.Run(mode, func(t *testing.T) {
			sh := newShop()
			_, err := sh.Purchase(ctx, 5, 1099, 91, []Item{{10, 1}, {short, 1}})
			if !errors.Is(err, ErrRollback) {
				t.Errorf("purchase beyond stock: %v, want ErrRollback", err)
			}
			if _, _, err := sh.Login(ctx, "user5", "wrong"); err == nil {
				t.Error("login with a wrong password: no error")
			}
			cu := d.Customer(5)
			if _, err := sh.NewCustomer(ctx, cu); !errors.Is(err, ErrTaken) {
				t.Errorf("registering user5 again: %v, want ErrTaken", err)
			}
			p, err := sh.Prices(ctx, []int{10, 20, 10})
			if err != nil || len(p) != 2 || p[10] != d.PriceCents(10) || p[20] != d.PriceCents(20) {
				t.Errorf("prices %v, %v", p, err)
			}
			n, err := sh.Browse(ctx, Browse{By: "title", Value: d.Product(321).Title, Batch: 9})
			if err != nil || n < 1 {
				t.Errorf("browse for product 321's title: %d, %v", n, err)
			}

			// A deadlock: another session holds product 2 and then asks for
			// product 1, which the purchase (1 then 2) holds.
			prod1, prod2 := 100+len(mode), 200+len(mode)
			other, err := pgx.Connect(ctx, s.Conn(t).Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(ctx)
			tx, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT 1 FROM inventory WHERE prod_id = $1 FOR UPDATE", prod2); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := sh.Purchase(ctx, 5, 1099, 91, []Item{{prod1, 1}, {prod2, 1}})
				done <- err
			}()
			// Let the purchase lock product 1 and wait for product 2.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				var waiting int
				c.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'").Scan(&waiting)
				if waiting > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			_, lockErr := tx.Exec(ctx, "SELECT 1 FROM inventory WHERE prod_id = $1 FOR UPDATE", prod1)
			perr := <-done
			if !errors.Is(perr, ErrDeadlock) && lockErr == nil {
				t.Errorf("purchase in a lock cycle: %v (the other session: %v), want ErrDeadlock", perr, lockErr)
			}
			t.Logf("%s: purchase in a lock cycle: %v; the other session: %v", mode, perr, lockErr)
		})
	}
}
