package olio_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/apps/olio/oliotest"
	"github.com/nearnative/nearnative/internal/platform"
)

func TestMain(m *testing.M) {
	code := m.Run()
	oliotest.Teardown()
	os.Exit(code)
}

// TestTemplateLoaded checks the template against the scale rules and that a
// second EnsureTemplate takes it from the cache.
func TestTemplateLoaded(t *testing.T) {
	e := oliotest.Setup(t)
	m := e.Template.Meta
	want := olio.CountsFor(oliotest.Size.Users)
	if m.Counts != want {
		t.Errorf("counts %+v, want %+v", m.Counts, want)
	}
	if m.Rows["person"] != int64(want.Persons) || m.Rows["socialevent"] != int64(want.Events) ||
		m.Rows["socialeventtag"] != int64(want.Tags) || m.Rows["address"] != int64(want.Persons+want.Events) {
		t.Errorf("rows %v do not match counts %+v", m.Rows, want)
	}
	t.Logf("template %s: generate %v, load %v (indexes %v), files %v (%d), db %d MB",
		m.Key, m.Generate, m.Load, m.Index, m.Files, m.NFiles, m.DBBytes>>20)

	start := time.Now()
	again, err := olio.EnsureTemplate(context.Background(), olio.Builder{Platform: e.Platform,
		CacheDir: e.Template.Dir[:strings.LastIndexByte(e.Template.Dir, '/')]}, oliotest.Size)
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir != e.Template.Dir || !again.Meta.Built.Equal(m.Built) {
		t.Errorf("second EnsureTemplate built again: %s %v, first %s %v", again.Dir, again.Meta.Built, e.Template.Dir, m.Built)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cached template took %v", d)
	}
}

// TestStackServes starts the three tiers from a copy of the template and
// checks what each serves.
func TestStackServes(t *testing.T) {
	e := oliotest.Setup(t)
	st, err := oliotest.Start(t, e, "serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.Template.Meta.Counts
	for table, want := range map[string]int{"person": c.Persons, "socialevent": c.Events, "socialeventtag": c.Tags} {
		var n int
		if err := st.DB.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows in the copy, want %d", table, n, want)
		}
	}

	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", st.Base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/index.php")
	if resp.StatusCode != 200 || strings.Count(body, `class="event"`) != 10 || !strings.Contains(body, `name="user_name"`) {
		t.Errorf("home page: HTTP %d, %d events, login form %v:\n%.2000s", resp.StatusCode,
			strings.Count(body, `class="event"`), strings.Contains(body, `name="user_name"`), body)
	}
	statics, err := olio.Statics()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statics {
		if slices.Contains([]string{"/static/img/map.png", "/static/img/attend.png", "/static/img/comment.png"}, s) {
			continue // the event page's
		}
		if !strings.Contains(body, `"`+s+`"`) {
			t.Errorf("home page does not reference %s", s)
		}
	}
	if resp, _ := get("/static/js/prototype.js"); resp.StatusCode != 200 || resp.Header.Get("Last-Modified") != olio.StaticModTime.Format(http.TimeFormat) {
		t.Errorf("prototype.js: HTTP %d, Last-Modified %q", resp.StatusCode, resp.Header.Get("Last-Modified"))
	}
	if resp, _ := get("/static/css/site.css", "If-Modified-Since", olio.StaticModTime.Format(http.TimeFormat)); resp.StatusCode != 304 {
		t.Errorf("conditional GET of a static: HTTP %d, want 304", resp.StatusCode)
	}
	if resp, body := get("/files/" + olio.EventThumb(1)); resp.StatusCode != 200 || body != string(olio.SampleThumb(7)) {
		t.Errorf("/files/%s: HTTP %d, %d bytes", olio.EventThumb(1), resp.StatusCode, len(body))
	}
	if resp, body := get("/events.php?socialEventID=999999"); resp.StatusCode != 404 || !strings.Contains(body, olio.ErrorMarker) {
		t.Errorf("missing event: HTTP %d %q, want 404 with the error marker", resp.StatusCode, body)
	}
	if resp, _ := get("/check.php/extra"); resp.StatusCode != 404 {
		t.Errorf("a path below a page (PATH_INFO): HTTP %d, want 404", resp.StatusCode)
	}
}

// TestFPMMissingExtension starts PHP-FPM without Debian's ini files (so
// without mysqli and gd): its probe must fail at once and name the
// extensions.
func TestFPMMissingExtension(t *testing.T) {
	e := oliotest.Setup(t)
	start := time.Now()
	_, err := oliotest.Start(t, e, "noext", func(s *platform.Spec) {
		cmd := s.Command
		s.Command = func(l platform.Listen) []string {
			argv := cmd(l)
			i := slices.Index(argv, "php-fpm8.2")
			return slices.Insert(argv, i+1, "-n")
		}
	})
	if err == nil {
		t.Fatal("PHP-FPM without mysqli and gd passed its readiness probe")
	}
	for _, want := range []string{"PHP-FPM at", "PHP extension mysqli is not loaded (install php8.2-mysql)", "gd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the probe took %v to report a missing extension", d)
	}
}

// BenchmarkLoadTemplate loads a template into a fresh cache and reports
// its phases; the size is OLIO_BENCH_USERS concurrent users (default 25).
// BENCH.md's figures: go test -run '^$' -bench LoadTemplate -benchtime 1x
func BenchmarkLoadTemplate(b *testing.B) {
	e := oliotest.Setup(b)
	size := oliotest.Size
	if v := os.Getenv("OLIO_BENCH_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("OLIO_BENCH_USERS=%q: %v", v, err)
		}
		size.Users = n
	}
	for i := 0; b.Loop(); i++ {
		cache := filepath.Join(e.Root, "bench-cache", strconv.Itoa(i))
		t, err := olio.EnsureTemplate(context.Background(), olio.Builder{Platform: e.Platform,
			CacheDir: cache, LogDir: e.LogDir, Log: os.Stderr}, size)
		if err != nil {
			b.Fatal(err)
		}
		m := t.Meta
		b.ReportMetric(m.Total.Seconds(), "total-s")
		b.ReportMetric(m.Generate.Seconds(), "generate-s")
		b.ReportMetric(m.Load.Seconds(), "load-s")
		b.ReportMetric(m.Index.Seconds(), "index-s")
		b.ReportMetric(m.Files.Seconds(), "files-s")
		b.ReportMetric(float64(m.DBBytes)/(1<<20), "db-MB")

		for _, what := range []string{"db", "site"} {
			dst := filepath.Join(e.Root, "bench-copy-"+what)
			start := time.Now()
			if what == "db" {
				err = t.CopyDB(dst, 0, 0)
			} else {
				err = t.CopySite(dst, 0, 0)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(start).Seconds(), "copy-"+what+"-s")
			start = time.Now()
			os.RemoveAll(dst)
			b.ReportMetric(time.Since(start).Seconds(), "remove-"+what+"-s")
		}
		os.RemoveAll(cache)
	}
}
