package dvdstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Size is one of DVD Store's named database sizes.
type Size struct {
	Name           string
	Customers      int
	Products       int
	OrdersPerMonth int // twelve months of orders are loaded
}

// Sizes are DVD Store's small and medium sizes (its "10 MB" and "1 GB"
// databases). The large one (200 M customers) does not fit the machines
// nearnative targets; a scale factor above 1 grows the medium one instead.
var Sizes = []Size{
	{Name: "10mb", Customers: 20_000, Products: 10_000, OrdersPerMonth: 1_000},
	{Name: "1gb", Customers: 2_000_000, Products: 100_000, OrdersPerMonth: 100_000},
}

// ParseSize returns the named size.
func ParseSize(name string) (Size, error) {
	var names []string
	for _, s := range Sizes {
		if s.Name == strings.ToLower(name) {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Size{}, fmt.Errorf("DVD Store size %q: want one of %s", name, strings.Join(names, ", "))
}

// Months of orders in the loaded history.
const Months = 12

// Password is every loaded customer's password (as in DVD Store).
const Password = "password"

// TaxRate is DVD Store's sales tax, 8.25%.
const TaxRate = 0.0825

// Restock levels of the RESTOCK trigger (functions.sql): an update that
// leaves fewer than RestockBelow in stock sets it back to RestockTo.
const (
	RestockBelow = 3
	RestockTo    = 250
)

// Username is the user name of loaded customer i (1-based).
func Username(i int) string { return "user" + strconv.Itoa(i) }

// Dataset is what the generator makes: a named size, scaled, from a seed.
// The same Dataset always yields the same rows.
type Dataset struct {
	Size Size
	// Scale multiplies the size's counts (1 = the named size); below 1 it
	// makes a smaller database for small machines and tests.
	Scale float64
	Seed  uint64
}

// maxRows bounds every scaled count: ids are PostgreSQL integers, and a
// bigger database is far beyond what a template copy per trial can serve.
const maxRows = 100_000_000

// Validate checks the scale and the resulting counts.
func (d Dataset) Validate() error {
	if _, err := ParseSize(d.Size.Name); err != nil {
		return err
	}
	if !(d.Scale > 0) || math.IsInf(d.Scale, 0) {
		return fmt.Errorf("DVD Store scale %v: want a positive number (1 = the named size)", d.Scale)
	}
	c := d.Counts()
	if c.Customers < 2 || c.Products < 2 || c.OrdersPerMonth < 1 {
		return fmt.Errorf("DVD Store size %s x %g: %d customers, %d products, %d orders a month is too small (want at least 2, 2 and 1): raise scale",
			d.Size.Name, d.Scale, c.Customers, c.Products, c.OrdersPerMonth)
	}
	if c.Customers > maxRows || c.Orders() > maxRows || c.Products > maxRows {
		return fmt.Errorf("DVD Store size %s x %g: %d customers and %d orders exceed nearnative's limit of %d rows a table: lower scale",
			d.Size.Name, d.Scale, c.Customers, c.Orders(), maxRows)
	}
	return nil
}

// String names the dataset, e.g. "10mb x0.5 seed 1".
func (d Dataset) String() string {
	return fmt.Sprintf("%s x%g seed %d", d.Size.Name, d.Scale, d.Seed)
}

// Counts are a dataset's row counts.
type Counts struct {
	Customers, Products, OrdersPerMonth int
}

// Orders is the number of loaded orders.
func (c Counts) Orders() int { return c.OrdersPerMonth * Months }

// Counts returns the scaled counts.
func (d Dataset) Counts() Counts {
	sc := func(n int) int { return int(math.Round(float64(n) * d.Scale)) }
	return Counts{Customers: sc(d.Size.Customers), Products: sc(d.Size.Products), OrdersPerMonth: sc(d.Size.OrdersPerMonth)}
}

// Streams of the generator: each row draws from its own stream, seeded from
// (dataset seed, stream, row), so any row can be made alone and the tables
// can be written in any order or in parallel.
const (
	streamCustomer uint64 = iota + 1
	streamProduct
	streamPrice
	streamStock
	streamOrder
)

// rng is a PCG generator for one row.
type rng struct{ p rand.PCG }

func mix(x uint64) uint64 { // splitmix64's finaliser
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func newRNG(seed, stream uint64, row int) rng {
	var r rng
	r.p.Seed(mix(seed^mix(stream)), mix(uint64(row)^(stream<<56)))
	return r
}

// intn returns a number in [0, n).
func (r *rng) intn(n int) int { return int(r.p.Uint64() % uint64(n)) }

// between returns a number in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

func (r *rng) letters(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + r.intn(26))
	}
	return string(b)
}

func (r *rng) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.intn(10))
	}
	return string(b)
}

func pick(r *rng, words []string) string { return words[r.intn(len(words))] }

// Customer is one row of CUSTOMERS.
type Customer struct {
	ID                   int
	FirstName, LastName  string
	Address1, Address2   string
	City                 string
	State                string // "" outside the US (NULL)
	Zip                  int    // 0 outside the US (NULL)
	Country              string
	Region               int // 1 US, 2 rest of the world
	Email, Phone         string
	CreditCardType       int
	CreditCard           string
	CreditCardExpiration string
	Username, Password   string
	Age, Income          int
	Gender               string
}

// Customer returns loaded customer i (1-based): the first half live in the
// US (state, 5-digit zip), the second half in one of ten other countries.
func (d Dataset) Customer(i int) Customer {
	r := newRNG(d.Seed, streamCustomer, i)
	n := d.Counts().Customers
	c := Customer{ID: i, FirstName: r.letters(6), LastName: r.letters(10)}
	c.Address1 = strconv.Itoa(r.between(1, 9999)) + " " + pick(&r, streets) + " STREET"
	c.City = pick(&r, cities)
	if i <= (n+1)/2 {
		c.State, c.Zip, c.Country, c.Region = pick(&r, States), r.between(10000, 99999), "US", 1
	} else {
		c.Country, c.Region = pick(&r, Countries), 2
	}
	c.Username, c.Password = Username(i), Password
	c.Email = c.Username + "@example.com"
	c.Phone = r.digits(10)
	c.CreditCardType = r.between(1, 5)
	c.CreditCard = r.digits(16)
	c.CreditCardExpiration = fmt.Sprintf("%04d/%02d", r.between(2026, 2030), r.between(1, 12))
	c.Age = r.between(18, 90)
	c.Income = 20000 * r.between(1, 5)
	g := r.intn(2)
	c.Gender = "MF"[g : g+1]
	return c
}

// Product is one row of PRODUCTS.
type Product struct {
	ID           int
	Category     int // 1..16
	Title, Actor string
	PriceCents   int
	Special      int // 1 for about 1% of products
	CommonProdID int // a related product
}

// Product returns product i (1-based): a random category, a two-word title,
// an actor, a price of 9.99 to 29.99 in whole dollars, 1% specials.
func (d Dataset) Product(i int) Product {
	r := newRNG(d.Seed, streamProduct, i)
	p := Product{ID: i, Category: r.between(1, len(Categories))}
	p.Title = pick(&r, titleWords) + " " + pick(&r, titleWords)
	p.Actor = pick(&r, actorFirst) + " " + pick(&r, actorLast)
	if r.intn(100) == 0 {
		p.Special = 1
	}
	p.CommonProdID = r.between(1, d.Counts().Products)
	p.PriceCents = d.PriceCents(i)
	return p
}

// PriceCents is product i's price in cents: 0.99 + 9..29 dollars.
func (d Dataset) PriceCents(i int) int {
	r := newRNG(d.Seed, streamPrice, i)
	return 99 + 100*r.between(9, 29)
}

// Stock is product i's loaded quantity in stock, uniform 0..500.
func (d Dataset) Stock(i int) int {
	r := newRNG(d.Seed, streamStock, i)
	return r.between(0, 500)
}

// Line is one order line.
type Line struct{ ProdID, Quantity int }

// Order is one loaded order with its lines.
type Order struct {
	ID         int
	Date       time.Time
	CustomerID int
	NLines     int
	Lines      [9]Line
	NetCents   int
	TaxCents   int
}

// TotalCents is the order's total, net plus tax.
func (o Order) TotalCents() int { return o.NetCents + o.TaxCents }

// historyYear is the year of the loaded order history.
const historyYear = 2024

// Order returns loaded order j (1-based): month (j-1)/OrdersPerMonth+1 of
// the history, a random customer, 1-9 lines of random products with
// quantity 1-3, amounts from the products' prices and the tax rate.
func (d Dataset) Order(j int) Order {
	c := d.Counts()
	r := newRNG(d.Seed, streamOrder, j)
	month := min((j-1)/c.OrdersPerMonth+1, Months)
	o := Order{ID: j, Date: time.Date(historyYear, time.Month(month), r.between(1, 28), 0, 0, 0, 0, time.UTC)}
	o.CustomerID = r.between(1, c.Customers)
	o.NLines = r.between(1, 9)
	for k := 0; k < o.NLines; k++ {
		l := Line{ProdID: r.between(1, c.Products), Quantity: r.between(1, 3)}
		o.Lines[k] = l
		o.NetCents += l.Quantity * d.PriceCents(l.ProdID)
	}
	o.TaxCents = TaxCents(o.NetCents)
	return o
}

// TaxCents is the tax on a net amount, rounded half up to a cent.
func TaxCents(net int) int { return (net*825 + 5000) / 10000 }

// Table is one table's COPY stream.
type Table struct {
	Name    string
	Columns []string
	// Rows is the number of rows Write writes.
	Rows int
	// Write writes the rows in COPY text format.
	Write func(ctx context.Context, w io.Writer) error
}

// Generator writes a dataset's tables. Inventory's sales column sums the
// quantities of every order line, computed (with the number of lines) once
// on first use.
type Generator struct {
	d         Dataset
	salesOnce sync.Once
	sales     []int32
	lines     int
}

// NewGenerator returns a generator for a valid dataset.
func NewGenerator(d Dataset) (*Generator, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Generator{d: d}, nil
}

// Tables returns every table to load, largest last; REORDER starts empty.
func (g *Generator) Tables() []Table {
	c := g.d.Counts()
	return []Table{
		{Name: "categories", Columns: []string{"category", "categoryname"}, Rows: len(Categories), Write: g.writeCategories},
		{Name: "products", Columns: []string{"prod_id", "category", "title", "actor", "price", "special", "common_prod_id"}, Rows: c.Products, Write: g.writeProducts},
		{Name: "inventory", Columns: []string{"prod_id", "quan_in_stock", "sales"}, Rows: c.Products, Write: g.writeInventory},
		{Name: "customers", Columns: []string{"customerid", "firstname", "lastname", "address1", "address2", "city", "state", "zip",
			"country", "region", "email", "phone", "creditcardtype", "creditcard", "creditcardexpiration", "username", "password",
			"age", "income", "gender"}, Rows: c.Customers, Write: g.writeCustomers},
		{Name: "orders", Columns: []string{"orderid", "orderdate", "customerid", "netamount", "tax", "totalamount"}, Rows: c.Orders(), Write: g.writeOrders},
		{Name: "orderlines", Columns: []string{"orderlineid", "orderid", "prod_id", "quantity", "orderdate"}, Rows: g.Lines(), Write: g.writeOrderlines},
		{Name: "cust_hist", Columns: []string{"customerid", "orderid", "prod_id"}, Rows: g.Lines(), Write: g.writeCustHist},
	}
}

// rowWriter builds COPY text rows.
type rowWriter struct {
	w   *bufio.Writer
	buf []byte
	n   int
	ctx context.Context
}

func newRowWriter(ctx context.Context, w io.Writer) *rowWriter {
	return &rowWriter{w: bufio.NewWriterSize(w, 256<<10), buf: make([]byte, 0, 512), ctx: ctx}
}

func (rw *rowWriter) int(v int) {
	rw.sep()
	rw.buf = strconv.AppendInt(rw.buf, int64(v), 10)
}

func (rw *rowWriter) str(s string) {
	rw.sep()
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			rw.buf = append(rw.buf, '\\', '\\')
		case '\t':
			rw.buf = append(rw.buf, '\\', 't')
		case '\n':
			rw.buf = append(rw.buf, '\\', 'n')
		case '\r':
			rw.buf = append(rw.buf, '\\', 'r')
		default:
			rw.buf = append(rw.buf, c)
		}
	}
}

func (rw *rowWriter) null() {
	rw.sep()
	rw.buf = append(rw.buf, '\\', 'N')
}

func (rw *rowWriter) cents(v int) {
	rw.sep()
	rw.buf = strconv.AppendInt(rw.buf, int64(v/100), 10)
	rw.buf = append(rw.buf, '.', byte('0'+v%100/10), byte('0'+v%10))
}

func (rw *rowWriter) date(t time.Time) {
	rw.sep()
	rw.buf = t.AppendFormat(rw.buf, "2006-01-02")
}

func (rw *rowWriter) sep() {
	if len(rw.buf) > 0 {
		rw.buf = append(rw.buf, '\t')
	}
}

// end finishes a row; every 4096 rows it checks for cancellation.
func (rw *rowWriter) end() error {
	rw.buf = append(rw.buf, '\n')
	_, err := rw.w.Write(rw.buf)
	rw.buf = rw.buf[:0]
	rw.n++
	if err == nil && rw.n%4096 == 0 {
		err = rw.ctx.Err()
	}
	return err
}

func (rw *rowWriter) flush() error { return rw.w.Flush() }

func (g *Generator) writeCategories(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for i, name := range Categories {
		rw.int(i + 1)
		rw.str(name)
		if err := rw.end(); err != nil {
			return err
		}
	}
	return rw.flush()
}

func (g *Generator) writeProducts(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for i := 1; i <= g.d.Counts().Products; i++ {
		p := g.d.Product(i)
		rw.int(p.ID)
		rw.int(p.Category)
		rw.str(p.Title)
		rw.str(p.Actor)
		rw.cents(p.PriceCents)
		rw.int(p.Special)
		rw.int(p.CommonProdID)
		if err := rw.end(); err != nil {
			return err
		}
	}
	return rw.flush()
}

// Sales returns, per product (index = prod_id), the quantity sold in the
// loaded orders.
func (g *Generator) Sales() []int32 {
	g.tally()
	return g.sales
}

// Lines returns the number of order lines (and of CUST_HIST rows).
func (g *Generator) Lines() int {
	g.tally()
	return g.lines
}

func (g *Generator) tally() {
	g.salesOnce.Do(func() {
		c := g.d.Counts()
		g.sales = make([]int32, c.Products+1)
		for j := 1; j <= c.Orders(); j++ {
			o := g.d.Order(j)
			g.lines += o.NLines
			for _, l := range o.Lines[:o.NLines] {
				g.sales[l.ProdID] += int32(l.Quantity)
			}
		}
	})
}

func (g *Generator) writeInventory(ctx context.Context, w io.Writer) error {
	sales := g.Sales()
	rw := newRowWriter(ctx, w)
	for i := 1; i <= g.d.Counts().Products; i++ {
		rw.int(i)
		rw.int(g.d.Stock(i))
		rw.int(int(sales[i]))
		if err := rw.end(); err != nil {
			return err
		}
	}
	return rw.flush()
}

func (g *Generator) writeCustomers(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for i := 1; i <= g.d.Counts().Customers; i++ {
		c := g.d.Customer(i)
		rw.int(c.ID)
		rw.str(c.FirstName)
		rw.str(c.LastName)
		rw.str(c.Address1)
		rw.str(c.Address2)
		rw.str(c.City)
		if c.Region == 1 {
			rw.str(c.State)
			rw.int(c.Zip)
		} else {
			rw.null()
			rw.null()
		}
		rw.str(c.Country)
		rw.int(c.Region)
		rw.str(c.Email)
		rw.str(c.Phone)
		rw.int(c.CreditCardType)
		rw.str(c.CreditCard)
		rw.str(c.CreditCardExpiration)
		rw.str(c.Username)
		rw.str(c.Password)
		rw.int(c.Age)
		rw.int(c.Income)
		rw.str(c.Gender)
		if err := rw.end(); err != nil {
			return err
		}
	}
	return rw.flush()
}

func (g *Generator) writeOrders(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for j := 1; j <= g.d.Counts().Orders(); j++ {
		o := g.d.Order(j)
		rw.int(o.ID)
		rw.date(o.Date)
		rw.int(o.CustomerID)
		rw.cents(o.NetCents)
		rw.cents(o.TaxCents)
		rw.cents(o.TotalCents())
		if err := rw.end(); err != nil {
			return err
		}
	}
	return rw.flush()
}

func (g *Generator) writeOrderlines(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for j := 1; j <= g.d.Counts().Orders(); j++ {
		o := g.d.Order(j)
		for k, l := range o.Lines[:o.NLines] {
			rw.int(k + 1)
			rw.int(o.ID)
			rw.int(l.ProdID)
			rw.int(l.Quantity)
			rw.date(o.Date)
			if err := rw.end(); err != nil {
				return err
			}
		}
	}
	return rw.flush()
}

func (g *Generator) writeCustHist(ctx context.Context, w io.Writer) error {
	rw := newRowWriter(ctx, w)
	for j := 1; j <= g.d.Counts().Orders(); j++ {
		o := g.d.Order(j)
		for _, l := range o.Lines[:o.NLines] {
			rw.int(o.CustomerID)
			rw.int(o.ID)
			rw.int(l.ProdID)
			if err := rw.end(); err != nil {
				return err
			}
		}
	}
	return rw.flush()
}
