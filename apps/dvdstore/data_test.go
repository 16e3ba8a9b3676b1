package dvdstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

func small(t testing.TB, scale float64, seed uint64) Dataset {
	t.Helper()
	s, err := ParseSize("10mb")
	if err != nil {
		t.Fatal(err)
	}
	return Dataset{Size: s, Scale: scale, Seed: seed}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		name      string
		customers int
		ok        bool
	}{{"10mb", 20000, true}, {"1GB", 2000000, true}, {"100gb", 0, false}, {"", 0, false}} {
		s, err := ParseSize(tt.name)
		if (err == nil) != tt.ok || s.Customers != tt.customers {
			t.Errorf("ParseSize(%q) = %+v, %v", tt.name, s, err)
		}
		if err != nil && !strings.Contains(err.Error(), "10mb, 1gb") {
			t.Errorf("ParseSize(%q) error does not list the sizes: %v", tt.name, err)
		}
	}
}

func TestDatasetValidate(t *testing.T) {
	big, _ := ParseSize("1gb")
	tests := []struct {
		name string
		d    Dataset
		want string
	}{
		{"10mb", small(t, 1, 1), ""},
		{"half", small(t, 0.5, 1), ""},
		{"1gb x20", Dataset{Size: big, Scale: 20, Seed: 1}, ""},
		{"zero scale", small(t, 0, 1), "positive"},
		{"negative scale", small(t, -1, 1), "positive"},
		{"too small", small(t, 0.00001, 1), "too small"},
		{"too big", Dataset{Size: big, Scale: 100, Seed: 1}, "limit"},
		{"unknown size", Dataset{Size: Size{Name: "huge"}, Scale: 1}, "want one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.d.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	c := small(t, 0.5, 1).Counts()
	if c.Customers != 10000 || c.Products != 5000 || c.OrdersPerMonth != 500 || c.Orders() != 6000 {
		t.Errorf("counts at 0.5: %+v", c)
	}
}

// TestRowsInRange checks every generated row of a small dataset against the
// DVD Store facts: ranges, half US customers, price steps, 1% specials.
func TestRowsInRange(t *testing.T) {
	d := small(t, 0.1, 7)
	c := d.Counts()
	us := 0
	for i := 1; i <= c.Customers; i++ {
		cu := d.Customer(i)
		if cu.Age < 18 || cu.Age > 90 || cu.Income%20000 != 0 || cu.Income < 20000 || cu.Income > 100000 ||
			cu.CreditCardType < 1 || cu.CreditCardType > 5 || len(cu.CreditCard) != 16 || (cu.Gender != "M" && cu.Gender != "F") ||
			cu.Username != Username(i) || cu.Password != Password {
			t.Fatalf("customer %d out of range: %+v", i, cu)
		}
		if cu.Region == 1 {
			us++
			if cu.Country != "US" || cu.Zip < 10000 || cu.Zip > 99999 || cu.State == "" {
				t.Fatalf("US customer %d: %+v", i, cu)
			}
		} else if cu.Country == "US" || cu.State != "" || cu.Zip != 0 {
			t.Fatalf("non-US customer %d: %+v", i, cu)
		}
	}
	if us != (c.Customers+1)/2 {
		t.Errorf("%d US customers of %d, want half", us, c.Customers)
	}
	specials := 0
	for i := 1; i <= c.Products; i++ {
		p := d.Product(i)
		if p.Category < 1 || p.Category > 16 || p.PriceCents < 999 || p.PriceCents > 2999 || p.PriceCents%100 != 99 ||
			p.CommonProdID < 1 || p.CommonProdID > c.Products || len(strings.Fields(p.Title)) != 2 || len(strings.Fields(p.Actor)) != 2 {
			t.Fatalf("product %d out of range: %+v", i, p)
		}
		specials += p.Special
		if s := d.Stock(i); s < 0 || s > 500 {
			t.Fatalf("stock of %d: %d", i, s)
		}
	}
	if specials < 1 || specials > c.Products/25 {
		t.Errorf("%d specials of %d products, want about 1%%", specials, c.Products)
	}
	lines := 0
	for j := 1; j <= c.Orders(); j++ {
		o := d.Order(j)
		if o.NLines < 1 || o.NLines > 9 || o.CustomerID < 1 || o.CustomerID > c.Customers || o.Date.Year() != historyYear {
			t.Fatalf("order %d: %+v", j, o)
		}
		if want := min((j-1)/c.OrdersPerMonth+1, 12); int(o.Date.Month()) != want {
			t.Fatalf("order %d in month %d, want %d", j, o.Date.Month(), want)
		}
		net := 0
		for _, l := range o.Lines[:o.NLines] {
			if l.Quantity < 1 || l.Quantity > 3 || l.ProdID < 1 || l.ProdID > c.Products {
				t.Fatalf("order %d line %+v", j, l)
			}
			net += l.Quantity * d.PriceCents(l.ProdID)
		}
		if net != o.NetCents || o.TaxCents != TaxCents(net) {
			t.Fatalf("order %d amounts %+v, net want %d", j, o, net)
		}
		lines += o.NLines
	}
	g, _ := NewGenerator(d)
	if g.Lines() != lines {
		t.Errorf("Lines() = %d, counted %d", g.Lines(), lines)
	}
}

func TestTaxCents(t *testing.T) {
	for _, tt := range []struct{ net, tax int }{{10000, 825}, {999, 82}, {1999, 165}, {0, 0}, {6061, 500}} {
		if got := TaxCents(tt.net); got != tt.tax {
			t.Errorf("TaxCents(%d) = %d, want %d", tt.net, got, tt.tax)
		}
	}
}

func writeAll(t testing.TB, d Dataset) map[string][]byte {
	t.Helper()
	g, err := NewGenerator(d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, tb := range g.Tables() {
		var b bytes.Buffer
		if err := tb.Write(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b.Bytes(), []byte("\n")); n != tb.Rows {
			t.Errorf("%s: %d rows written, Rows says %d", tb.Name, n, tb.Rows)
		}
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if f := strings.Split(line, "\t"); len(f) != len(tb.Columns) {
				t.Fatalf("%s: row %q has %d fields for %d columns", tb.Name, line, len(f), len(tb.Columns))
			}
		}
		out[tb.Name] = b.Bytes()
	}
	return out
}

func TestDeterministic(t *testing.T) {
	a := writeAll(t, small(t, 0.05, 1))
	b := writeAll(t, small(t, 0.05, 1))
	c := writeAll(t, small(t, 0.05, 2))
	if len(a) != 7 {
		t.Fatalf("%d tables, want 7 (REORDER starts empty)", len(a))
	}
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs of the same dataset", name)
		}
		if name != "categories" && bytes.Equal(a[name], c[name]) {
			t.Errorf("%s is the same for seeds 1 and 2", name)
		}
	}
}

func TestCopyRows(t *testing.T) {
	d := small(t, 0.05, 3)
	tables := writeAll(t, d)
	first := func(name string) string {
		s, _, _ := strings.Cut(string(tables[name]), "\n")
		return s
	}
	if got := first("categories"); got != "1\tAction" {
		t.Errorf("categories row 1 %q", got)
	}
	p := d.Product(1)
	if got, want := first("products"), strings.Join([]string{"1", itoa(p.Category), p.Title, p.Actor, money(p.PriceCents), itoa(p.Special), itoa(p.CommonProdID)}, "\t"); got != want {
		t.Errorf("products row 1 %q, want %q", got, want)
	}
	o := d.Order(1)
	if got, want := first("orders"), strings.Join([]string{"1", o.Date.Format("2006-01-02"), itoa(o.CustomerID), money(o.NetCents), money(o.TaxCents), money(o.TotalCents())}, "\t"); got != want {
		t.Errorf("orders row 1 %q, want %q", got, want)
	}
	// The last customer is outside the US: state and zip are NULL.
	rows := strings.Split(strings.TrimSuffix(string(tables["customers"]), "\n"), "\n")
	if f := strings.Split(rows[len(rows)-1], "\t"); f[6] != `\N` || f[7] != `\N` {
		t.Errorf("last customer's state/zip %q %q, want NULL", f[6], f[7])
	}
	// Escaping of COPY's special characters.
	var b bytes.Buffer
	rw := newRowWriter(context.Background(), &b)
	rw.str("a\tb\\c\nd\re")
	rw.cents(5)
	rw.cents(123456)
	rw.end()
	rw.flush()
	if got := b.String(); got != "a\\tb\\\\c\\nd\\re\t0.05\t1234.56\n" {
		t.Errorf("escaped row %q", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func money(c int) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

func TestWriteCancelled(t *testing.T) {
	g, _ := NewGenerator(small(t, 1, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tb := range g.Tables() {
		if tb.Rows < 4096 {
			continue
		}
		if err := tb.Write(ctx, io.Discard); err == nil {
			t.Errorf("%s: Write with a cancelled context succeeded", tb.Name)
		}
	}
}

func TestStatements(t *testing.T) {
	got := statements("-- comment\nCREATE INDEX a ON t (x);\n\n  -- another\nALTER TABLE t\n  ADD CONSTRAINT c PRIMARY KEY (x);\nSELECT 1")
	want := []string{"CREATE INDEX a ON t (x);", "ALTER TABLE t\n  ADD CONSTRAINT c PRIMARY KEY (x);", "SELECT 1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("statements = %q", got)
	}
	if n := len(statements(sqlFile("indexes.sql"))); n != 13 {
		t.Errorf("indexes.sql has %d statements, want 13", n)
	}
	if n := len(statements(sqlFile("constraints.sql"))); n != 4 {
		t.Errorf("constraints.sql has %d statements, want 4", n)
	}
}

func TestKey(t *testing.T) {
	base := Key(small(t, 1, 1), "15.20")
	if !strings.HasPrefix(base, "10mb-x1-seed1-") {
		t.Errorf("Key = %s", base)
	}
	for name, k := range map[string]string{
		"scale":   Key(small(t, 0.5, 1), "15.20"),
		"seed":    Key(small(t, 1, 2), "15.20"),
		"version": Key(small(t, 1, 1), "15.21"),
	} {
		if k == base {
			t.Errorf("the key does not change with the %s", name)
		}
	}
	if Key(small(t, 1, 1), "15.20") != base {
		t.Error("the key is not stable")
	}
}

func TestEstimateBytes(t *testing.T) {
	// Measured on the development machine (BENCH.md): 78.6 MB and 1501.7 MB.
	big, _ := ParseSize("1gb")
	for _, tt := range []struct {
		d        Dataset
		measured float64
	}{{small(t, 1, 1), 78.6}, {Dataset{Size: big, Scale: 1, Seed: 1}, 1501.7}} {
		est := float64(EstimateBytes(tt.d)) / (1 << 20)
		if est < tt.measured*0.9 || est > tt.measured*1.2 {
			t.Errorf("%s: estimate %.1f MB, measured %.1f MB", tt.d, est, tt.measured)
		}
	}
}

// BenchmarkGenerate writes every table of a size to io.Discard: the cost of
// generation alone (go test -bench Generate -run '^$' ./apps/dvdstore).
func BenchmarkGenerate(b *testing.B) {
	for _, name := range []string{"10mb", "1gb"} {
		b.Run(name, func(b *testing.B) {
			s, _ := ParseSize(name)
			d := Dataset{Size: s, Scale: 1, Seed: 1}
			for i := 0; i < b.N; i++ {
				g, _ := NewGenerator(d)
				rows := 0
				for _, tb := range g.Tables() {
					if err := tb.Write(context.Background(), io.Discard); err != nil {
						b.Fatal(err)
					}
					rows += tb.Rows
				}
				b.ReportMetric(float64(rows), "rows")
			}
		})
	}
}
