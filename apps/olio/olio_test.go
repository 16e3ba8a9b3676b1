package olio

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/fcgi"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/ready"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestCountsFor(t *testing.T) {
	for _, c := range []struct {
		users int
		want  Counts
	}{
		// tags = round(5000 (1-e^-x)/(1+e^-x)), x = 100 users / 10000
		{25, Counts{Persons: 2500, Tags: 622, Events: 1866}},
		{100, Counts{Persons: 10000, Tags: 2311, Events: 6933}},
		{1500, Counts{Persons: 150000, Tags: 5000, Events: 15000}},
	} {
		if got := CountsFor(c.users); got != c.want {
			t.Errorf("CountsFor(%d) = %+v, want %+v", c.users, got, c.want)
		}
	}
}

func TestSizeValidate(t *testing.T) {
	for _, c := range []struct {
		size Size
		err  string
	}{
		{Size{Users: 25}, ""},
		{Size{Users: 1500, Seed: 7}, ""},
		{Size{Users: 24}, "want 25 to"},
		{Size{Users: 0}, "want 25 to"},
		{Size{Users: MaxUsers + 1}, "want 25 to"},
	} {
		err := c.size.Validate()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v.Validate() = %v, want %q", c.size, err, c.err)
		}
	}
}

func TestSizeFits(t *testing.T) {
	s := Size{Users: 100}
	if err := s.Fits(100); err != nil {
		t.Error(err)
	}
	if err := s.Fits(101); err == nil || !strings.Contains(err.Error(), "101 users per instance exceed the 100") {
		t.Errorf("101 users: %v", err)
	}
	if err := s.Fits(0); err == nil {
		t.Error("0 users fit")
	}
}

func TestTagNamesUnique(t *testing.T) {
	seen := map[string]int{}
	for i := 1; i <= 20000; i++ {
		n := TagName(i)
		if j, ok := seen[n]; ok {
			t.Fatalf("TagName(%d) = TagName(%d) = %q", i, j, n)
		}
		if len(n) > 50 || strings.ContainsAny(n, " \t") {
			t.Fatalf("TagName(%d) = %q: not a valid tag", i, n)
		}
		seen[n] = i
	}
}

// tables generates every table of a size into memory.
func tables(t *testing.T, s Size) map[string][]byte {
	t.Helper()
	g, err := NewGenerator(s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, tb := range g.Tables() {
		var b bytes.Buffer
		if _, err := g.Write(tb.Name, &b); err != nil {
			t.Fatal(err)
		}
		out[tb.Name] = b.Bytes()
	}
	return out
}

func TestGeneratorDeterministic(t *testing.T) {
	a, b := tables(t, Size{Users: 25, Seed: 1}), tables(t, Size{Users: 25, Seed: 1})
	c := tables(t, Size{Users: 25, Seed: 2})
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs of the same seed", name)
		}
		if name != "socialeventtag_socialevent" && name != "socialeventtag" && bytes.Equal(a[name], c[name]) {
			t.Errorf("%s is the same for seeds 1 and 2", name)
		}
	}
	// Tables in another order (own streams) give the same bytes.
	g, _ := NewGenerator(Size{Users: 25, Seed: 1})
	var buf bytes.Buffer
	g.Write("comments_rating", &buf)
	g.Write("person", io.Discard)
	buf.Reset()
	g.Write("person", &buf)
	if !bytes.Equal(buf.Bytes(), a["person"]) {
		t.Error("person differs when written after comments_rating")
	}
}

// rows splits a table into its fields.
func rows(b []byte) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, strings.Split(sc.Text(), "\t"))
	}
	return out
}

func TestGeneratorRatios(t *testing.T) {
	s := Size{Users: 25, Seed: 3}
	c := CountsFor(s.Users)
	tb := tables(t, s)
	g, _ := NewGenerator(s)
	for _, table := range g.Tables() {
		for i, r := range rows(tb[table.Name]) {
			if len(r) != len(table.Columns) {
				t.Fatalf("%s row %d has %d fields, want %d: %q", table.Name, i+1, len(r), len(table.Columns), r)
			}
		}
	}
	if n := len(rows(tb["person"])); n != c.Persons {
		t.Errorf("%d persons, want %d", n, c.Persons)
	}
	if n := len(rows(tb["address"])); n != c.Persons+c.Events {
		t.Errorf("%d addresses, want %d", n, c.Persons+c.Events)
	}
	perKey := func(table string, key int) map[string]int {
		m := map[string]int{}
		for _, r := range rows(tb[table]) {
			m[r[key]]++
		}
		return m
	}
	check := func(what string, m map[string]int, n, lo, hi int) {
		t.Helper()
		if len(m) > n {
			t.Errorf("%s: %d keys, want at most %d", what, len(m), n)
		}
		total := 0
		for k, v := range m {
			if v < lo || v > hi {
				t.Errorf("%s: %s has %d, want %d..%d", what, k, v, lo, hi)
			}
			total += v
		}
		// The mean of a uniform draw from lo..hi, within 10%.
		if mean, want := float64(total)/float64(n), float64(lo+hi)/2; mean < want*0.9 || mean > want*1.1 {
			t.Errorf("%s: mean %.2f, want about %.1f", what, mean, want)
		}
	}
	friends := perKey("person_person", 0)
	if len(friends) != c.Persons {
		t.Errorf("%d persons have friends, want all %d", len(friends), c.Persons)
	}
	check("friends a person", friends, c.Persons, MinFriends, MaxFriends)
	check("tags an event", perKey("socialeventtag_socialevent", 1), c.Events, MinEventTags, MaxEventTags)
	check("attendees an event", perKey("person_socialevent", 0), c.Events, MinAttendees, MaxAttendees)
	comments := perKey("comments_rating", 2)
	total := 0
	for _, v := range comments {
		total += v
	}
	if mean := float64(total) / float64(c.Events); mean < 9 || mean > 11 {
		t.Errorf("%.2f comments an event, want about 10 (0..20)", mean)
	}
	for _, r := range rows(tb["person_person"]) {
		if r[0] == r[1] {
			t.Fatalf("person %s is their own friend", r[0])
		}
	}
	for _, r := range rows(tb["comments_rating"]) {
		if v, _ := strconv.Atoi(r[4]); v < MinRating || v > MaxRating {
			t.Fatalf("comment rating %d", v)
		}
	}
	// A tag's refcount is the number of its events.
	links := perKey("socialeventtag_socialevent", 0)
	for _, r := range rows(tb["socialeventtag"]) {
		if n, _ := strconv.Atoi(r[2]); n != links[r[0]] {
			t.Fatalf("tag %s has refcount %d but %d events", r[0], n, links[r[0]])
		}
	}
	// numberofvotes and totalscore of an event are its comments'.
	votes := map[string][2]int{}
	for _, r := range rows(tb["comments_rating"]) {
		v, _ := strconv.Atoi(r[4])
		x := votes[r[2]]
		votes[r[2]] = [2]int{x[0] + v, x[1] + 1}
	}
	for _, r := range rows(tb["socialevent"]) {
		if fmt.Sprint(votes[r[0]][0], votes[r[0]][1]) != r[14]+" "+r[15] {
			t.Fatalf("event %s: score/votes %s/%s, comments say %v", r[0], r[14], r[15], votes[r[0]])
		}
	}
}

func TestRowWriterEscapes(t *testing.T) {
	var b bytes.Buffer
	w := &rowWriter{w: bufio.NewWriter(&b)}
	w.int(7)
	w.str("a\tb\\c\nd\x00")
	w.end()
	w.w.Flush()
	if got, want := b.String(), "7\ta\\tb\\\\c\\nd\\0\n"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
}

func TestMedia(t *testing.T) {
	for k := range PoolSize {
		img, th, doc := SampleImage(k), SampleThumb(k), SampleDocument(k)
		if !bytes.HasPrefix(img, []byte{0xff, 0xd8}) || !bytes.HasPrefix(th, []byte{0xff, 0xd8}) {
			t.Fatalf("pool %d: not JPEGs", k)
		}
		if len(img) < 10<<10 || len(th) < 1<<10 || len(th) >= len(img) {
			t.Errorf("pool %d: image %d bytes, thumbnail %d", k, len(img), len(th))
		}
		if !bytes.HasPrefix(doc, []byte("%PDF-1.4")) || !bytes.HasSuffix(doc, []byte("%%EOF\n")) {
			t.Fatalf("pool %d: not a PDF", k)
		}
		// The xref table's offsets point at the objects.
		i := bytes.LastIndex(doc, []byte("startxref\n"))
		xref, _ := strconv.Atoi(strings.Fields(string(doc[i+10:]))[0])
		if !bytes.HasPrefix(doc[xref:], []byte("xref\n")) {
			t.Fatalf("pool %d: startxref %d does not point at the xref table", k, xref)
		}
		lines := strings.Split(string(doc[xref:]), "\n")
		for obj := 1; obj < 9; obj++ {
			off, _ := strconv.Atoi(lines[2+obj][:10])
			if !bytes.HasPrefix(doc[off:], []byte(fmt.Sprintf("%d 0 obj", obj))) {
				t.Fatalf("pool %d: xref entry %d (%d) does not point at its object", k, obj, off)
			}
		}
	}
	if bytes.Equal(SampleImage(0), SampleImage(1)) {
		t.Error("pool pictures 0 and 1 are the same")
	}
	if !bytes.Equal(SampleImage(3), SampleImage(3+PoolSize)) {
		t.Error("SampleImage does not wrap around the pool")
	}
}

func TestKey(t *testing.T) {
	base := Key(Size{Users: 25, Seed: 1}, "mariadbd 10.11")
	if !strings.HasPrefix(base, "u25-s1-") {
		t.Errorf("key %q does not name the size", base)
	}
	for _, other := range []string{Key(Size{Users: 26, Seed: 1}, "mariadbd 10.11"), Key(Size{Users: 25, Seed: 2}, "mariadbd 10.11"),
		Key(Size{Users: 25, Seed: 1}, "mariadbd 10.12")} {
		if other == base {
			t.Errorf("key %q did not change", other)
		}
	}
	if Key(Size{Users: 25, Seed: 1}, "mariadbd 10.11") != base {
		t.Error("key not stable")
	}
}

// TestSpecsGolden renders each tier's command for fixed settings and a fixed
// Listen and compares it with testdata (go test -update rewrites them).
func TestSpecsGolden(t *testing.T) {
	l := platform.Listen{Host: "0.0.0.0", Ports: map[string]int{PortMySQL: 3306, PortFCGI: 9000, PortHTTP: 8080}, Dir: "/nearnative"}
	db, err := MariaDBSpec(MariaDBSettings{DataDir: "/data/db"})
	if err != nil {
		t.Fatal(err)
	}
	load, err := mariadbSpec(MariaDBSettings{DataDir: "/data/db"}, true, "/data/run/mysqld.pid")
	if err != nil {
		t.Fatal(err)
	}
	fpm, err := FPMSpec(FPMSettings{SiteDir: "/srv/olio", DBAddr: "10.0.0.2:3306"})
	if err != nil {
		t.Fatal(err)
	}
	web, err := NginxSpec(NginxSettings{SiteDir: "/srv/olio", FPMAddr: "127.0.0.1:9000", FileStore: "/cache/olio/u25/files"})
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]platform.Spec{"mariadb": db, "mariadb-load": load, "php-fpm": fpm, "nginx": web} {
		t.Run(name, func(t *testing.T) {
			argv := spec.Command(l)
			files := spec.Render(l)
			if n := len(files); n != 1 && (name != "mariadb" || n != 2 || files[1].Path != "grants.sql") {
				t.Fatalf("%d rendered files, want the configuration alone (and the serving MariaDB's grants): %+v", len(files), files)
			}
			f := files[0]
			got := fmt.Sprintf("# %s\n# exec %s\n%s", path.Join(l.Dir, f.Path), strings.Join(argv, " "), f.Content)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, golden, got)
			}
		})
	}
	if db.User != "mysql" || fpm.User != "www-data" || web.User != "" {
		t.Errorf("users: MariaDB %q (want mysql), PHP-FPM %q (want www-data), nginx %q (want the platform's, root)", db.User, fpm.User, web.User)
	}
	if len(load.Files) != 1 || !strings.Contains(string(load.Files[0].Content), "GRANT ALL PRIVILEGES ON olio.* TO 'olio'@'%'") {
		t.Errorf("the loader's init.sql: %+v", load.Files)
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"db ok", MariaDBSettings{DataDir: "/d"}.Validate(), ""},
		{"db relative", MariaDBSettings{DataDir: "d"}.Validate(), "absolute"},
		{"db pool", MariaDBSettings{DataDir: "/d", BufferPool: "1k"}.Validate(), "at least 16m"},
		{"db pool syntax", MariaDBSettings{DataDir: "/d", BufferPool: "lots"}.Validate(), "size"},
		{"db flush", MariaDBSettings{DataDir: "/d", FlushLogAtCommit: 3}.Validate(), "0, 1 or 2"},
		{"fpm ok", FPMSettings{SiteDir: "/s", DBAddr: "db:3306"}.Validate(), ""},
		{"fpm addr", FPMSettings{SiteDir: "/s", DBAddr: "db"}.Validate(), "not host:port"},
		{"fpm port", FPMSettings{SiteDir: "/s", DBAddr: "db:0"}.Validate(), "1 to 65535"},
		{"fpm children", FPMSettings{SiteDir: "/s", DBAddr: "db:1", Children: -1}.Validate(), "children"},
		{"fpm site", FPMSettings{DBAddr: "db:1"}.Validate(), "absolute"},
		{"nginx ok", NginxSettings{SiteDir: "/s", FPMAddr: "[::1]:9000", FileStore: "/f"}.Validate(), ""},
		{"nginx store", NginxSettings{SiteDir: "/s", FPMAddr: "[::1]:9000"}.Validate(), "file store"},
		{"nginx addr", NginxSettings{SiteDir: "/s", FPMAddr: ""}.Validate(), "not host:port"},
		{"nginx workers", NginxSettings{SiteDir: "/s", FPMAddr: "a:1", FileStore: "/f", Workers: 1000}.Validate(), "workers"},
		{"nginx connections", NginxSettings{SiteDir: "/s", FPMAddr: "a:1", FileStore: "/f", Connections: 1}.Validate(), "connections"},
	} {
		if (c.err == nil) != (c.want == "") || (c.err != nil && !strings.Contains(c.err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
	if _, err := FPMSpec(FPMSettings{SiteDir: "/s"}); err == nil {
		t.Error("FPMSpec without a database address succeeded")
	}
}

// TestFCGIClient asks Go's own FastCGI server (net/http/fcgi) for a page.
func TestFCGIClient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go fcgi.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := fcgi.ProcessEnv(r)
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(503)
		}
		fmt.Fprintf(w, "script=%s query=%s %s", env["SCRIPT_FILENAME"], r.URL.RawQuery, strings.Repeat("x", 70000))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fcgiGet(ctx, l.Addr().String(), "/srv/olio/www/check.php", "a=1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || !strings.HasPrefix(string(resp.Body), "script=/srv/olio/www/check.php query=a=1 xxx") || len(resp.Body) < 70000 {
		t.Errorf("answer: %d %.80q (%d bytes)", resp.Status, resp.Body, len(resp.Body))
	}
	resp, err = fcgiGet(ctx, l.Addr().String(), "/x.php", "fail=1")
	if err != nil || resp.Status != 503 {
		t.Errorf("error status: %v %v", resp, err)
	}
}

func TestCheckAnswer(t *testing.T) {
	if err := checkAnswer(200, []byte("OK olio tags=3\n")); err != nil {
		t.Error(err)
	}
	err := checkAnswer(500, []byte("\nOLIO-ERROR: PHP extension gd is not loaded (install php8.2-gd)\n"))
	if err == nil || err.Error() != "check.php: HTTP 500: PHP extension gd is not loaded (install php8.2-gd)" {
		t.Errorf("got %v", err)
	}
	// A running server's answer ends the readiness wait at once: poll asks
	// once and names the server.
	probes := 0
	err = poll(context.Background(), "PHP-FPM at x", 5*time.Second, func(context.Context) error {
		probes++
		return checkAnswer(500, []byte("OLIO-ERROR: PHP extension gd is not loaded\n"))
	})
	if probes != 1 || !ready.IsFinal(err) || !strings.HasPrefix(fmt.Sprint(err), "PHP-FPM at x is not ready: check.php: HTTP 500") {
		t.Errorf("%d probe(s), then %v; want one, and the answer as final", probes, err)
	}
}

func TestShutdownBadPidFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pid")
	os.WriteFile(p, []byte("garbage"), 0o644)
	if err := shutdown(context.Background(), p, time.Second); err == nil || !strings.Contains(err.Error(), "not a process id") {
		t.Errorf("got %v", err)
	}
}

func TestGrantsSQL(t *testing.T) {
	got := GrantsSQL([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.214.3.0/30")})
	for _, want := range []string{
		"CREATE USER IF NOT EXISTS 'olio'@'127.0.0.0/255.0.0.0' IDENTIFIED BY 'olio';",
		"GRANT ALL PRIVILEGES ON olio.* TO 'olio'@'10.214.3.0/255.255.255.252';",
		"DROP USER IF EXISTS 'olio'@'%';",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("grants lack %q:\n%s", want, got)
		}
	}
}
