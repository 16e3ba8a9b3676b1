package auction

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/nearnative/nearnative/internal/state"
)

// rows reads every row of the data into per-table slices.
func rows(t *testing.T, d *Data) map[string][][]any {
	t.Helper()
	out := map[string][][]any{}
	for _, tb := range d.Tables() {
		next := tb.Rows()
		for {
			r, err := next()
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				break
			}
			if len(r) != len(tb.Columns) {
				t.Fatalf("%s: row of %d values for %d columns", tb.Name, len(r), len(tb.Columns))
			}
			out[tb.Name] = append(out[tb.Name], r)
		}
	}
	return out
}

func digest(t *testing.T, d *Data) string {
	h := sha256.New()
	for _, tb := range d.Tables() {
		next := tb.Rows()
		for {
			r, _ := next()
			if r == nil {
				break
			}
			fmt.Fprintf(h, "%s %v\n", tb.Name, r)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func money(v any) int64 {
	n := v.(pgtype.Numeric)
	return new(big.Int).Set(n.Int).Int64() // Exp is -2: cents
}

func TestSizeValidate(t *testing.T) {
	for _, n := range []int{0, -1, MaxMaxUsers + 1} {
		if err := (Size{n}).Validate(); err == nil || !strings.Contains(err.Error(), "maximum users") {
			t.Errorf("size %d: %v", n, err)
		}
	}
	if _, err := Generate(Size{0}, 1); err == nil {
		t.Error("Generate accepted size 0")
	}
}

// TestGenerate checks the data against Weathervane's rules per user and
// its own consistency: purchases, bids and attendance per registered user,
// live auctions, items and images, winning bids.
func TestGenerate(t *testing.T) {
	for _, n := range []int{1, 16, 45} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			size := Size{n}
			d, err := Generate(size, 42)
			if err != nil {
				t.Fatal(err)
			}
			r := rows(t, d)
			users := 5 * n
			live := (n + 14) / 15
			want := map[string]int{"users": users, "auction": size.HistoryAuctions() + live,
				"item": 5*users + 25*live, "bid": 100 * users, "purchase": 5 * users, "attendance": 20 * users, "image": d.Images()}
			for tb, w := range want {
				if len(r[tb]) != w {
					t.Errorf("%s: %d rows, want %d", tb, len(r[tb]), w)
				}
			}
			per := func(tb string, col int) map[int64]int {
				m := map[int64]int{}
				for _, row := range r[tb] {
					m[row[col].(int64)]++
				}
				return m
			}
			for tb, w := range map[string]int{"purchase": 5, "bid": 100, "attendance": 20} {
				col := map[string]int{"purchase": 1, "bid": 3, "attendance": 1}[tb]
				for u, c := range per(tb, col) {
					if c != w {
						t.Fatalf("%s: user %d has %d, want %d", tb, u, c, w)
					}
				}
			}
			// Each sold item went to the highest, last bid, by its buyer.
			last := map[int64][]any{}
			for _, b := range r["bid"] {
				item := b[1].(int64)
				if prev, ok := last[item]; ok && money(b[4]) <= money(prev[4]) {
					t.Fatalf("item %d: bids not rising: %v then %v", item, prev[4], b[4])
				}
				last[item] = b
			}
			for _, p := range r["purchase"] {
				b := last[p[2].(int64)]
				if b[3].(int64) != p[1].(int64) || money(b[4]) != money(p[4]) {
					t.Fatalf("purchase %v does not match the item's last bid %v", p, b)
				}
			}
			// Live auctions: PENDING, 25 items each, 1 to 4 images per item.
			pending, images := 0, map[int64]int{}
			for _, a := range r["auction"] {
				if a[4] == "PENDING" && a[5] == true {
					pending++
				}
			}
			if pending != live {
				t.Errorf("%d live auctions, want ceil(%d/15) = %d", pending, n, live)
			}
			for _, im := range r["image"] {
				images[im[1].(int64)]++
				for s := 3; s <= 5; s++ {
					if b := im[s].([]byte); len(b) < 100 || b[0] != 0xFF || b[1] != 0xD8 {
						t.Fatalf("image %v size %d is not a JPEG", im[0], s)
					}
				}
			}
			for _, it := range r["item"] {
				if it[9] != "PENDING" {
					continue
				}
				if c := images[it[0].(int64)]; c < 1 || c > 4 || int32(c) != it[15].(int32) {
					t.Fatalf("live item %d: %d images, num_images %v", it[0], c, it[15])
				}
			}
			for _, row := range r["bid"] {
				if !row[5].(time.Time).Before(DataEpoch) {
					t.Fatalf("bid placed at %v, not before the data's epoch", row[5])
				}
			}
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, _ := Generate(Size{20}, 7)
	b, _ := Generate(Size{20}, 7)
	c, _ := Generate(Size{20}, 8)
	if digest(t, a) != digest(t, b) {
		t.Error("the same size and seed gave different data")
	}
	if digest(t, a) == digest(t, c) {
		t.Error("different seeds gave the same data")
	}
}

func TestTemplateKey(t *testing.T) {
	k := TemplateKey(Size{30}, 1, "postgres (PostgreSQL) 15.20")
	for _, other := range []string{
		TemplateKey(Size{31}, 1, "postgres (PostgreSQL) 15.20"),
		TemplateKey(Size{30}, 2, "postgres (PostgreSQL) 15.20"),
		TemplateKey(Size{30}, 1, "postgres (PostgreSQL) 15.21"),
	} {
		if other == k {
			t.Errorf("key %s does not change with size, seed or server version", k)
		}
	}
	if TemplateKey(Size{30}, 1, "postgres (PostgreSQL) 15.20") != k {
		t.Error("the key is not stable")
	}
}

func TestTemplateOptionsValidate(t *testing.T) {
	if err := (TemplateOptions{}).Validate(); err == nil {
		t.Error("empty options accepted")
	}
	if err := (TemplateOptions{State: stateDir("/x"), Size: Size{10}}).Validate(); err == nil || !strings.Contains(err.Error(), "platform") {
		t.Errorf("options without a platform: %v", err)
	}
}

func TestCopyTo(t *testing.T) {
	src := t.TempDir()
	pg := filepath.Join(src, "pgdata")
	for p, body := range map[string]string{"PG_VERSION": "15\n", "base/1/1259": "catalog", "global/pg_control": "control"} {
		os.MkdirAll(filepath.Join(pg, filepath.Dir(p)), 0o700)
		if err := os.WriteFile(filepath.Join(pg, p), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("base", filepath.Join(pg, "link")); err != nil {
		t.Fatal(err)
	}
	tpl := &Template{Dir: src}
	dst := filepath.Join(t.TempDir(), "data")
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 4242, 4243
	}
	if err := tpl.CopyTo(dst, uid, gid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, "base/1/1259"))
	if err != nil || string(b) != "catalog" {
		t.Errorf("copied file: %q %v", b, err)
	}
	st, err := os.Stat(dst)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v %v", st.Mode(), err)
	}
	if fi, _ := os.Lstat(filepath.Join(dst, "global/pg_control")); fi != nil {
		if o := owner(fi); o != [2]int{uid, gid} {
			t.Errorf("owner %v, want %d:%d", o, uid, gid)
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "base" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if err := tpl.CopyTo(dst, uid, gid); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("copy into a non-empty dir: %v", err)
	}
}

func stateDir(p string) state.Dir { return state.Dir{Root: p} }

func owner(fi os.FileInfo) [2]int {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]int{int(st.Uid), int(st.Gid)}
}

func TestAppendCSV(t *testing.T) {
	ts := time.Date(2023, 5, 6, 7, 8, 9, 123456000, time.UTC)
	tests := []struct {
		v    any
		want string
	}{
		{nil, ""},
		{int64(-42), "-42"},
		{int32(7), "7"},
		{true, "t"},
		{"say \"hi\", ok", `"say ""hi"", ok"`},
		{"", `""`},
		{ts, "2023-05-06 07:08:09.123456Z"},
		{[]byte{0xff, 0x01}, `\xff01`},
		{cents(12345), "123.45"},
		{cents(5), "0.05"},
		{pgtype.Numeric{Int: big.NewInt(-250), Exp: -2, Valid: true}, "-2.50"},
	}
	for _, tt := range tests {
		got, err := appendCSV(nil, tt.v)
		if err != nil || string(got) != tt.want {
			t.Errorf("appendCSV(%v) = %q, %v; want %q", tt.v, got, err, tt.want)
		}
	}
	if _, err := appendCSV(nil, 1.5); err == nil {
		t.Error("a float64 was accepted")
	}
}
