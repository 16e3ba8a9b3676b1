package web20

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nearnative/nearnative/apps/olio"
)

// fakeSite serves pages shaped like the site's, and counts requests.
type fakeSite struct {
	mu       sync.Mutex
	requests map[string]int
	ims      map[string]int // requests with If-Modified-Since
	page     string         // the body of every .php page
	status   int
}

func (f *fakeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests[r.URL.Path]++
	if r.Header.Get("If-Modified-Since") != "" {
		f.ims[r.URL.Path]++
	}
	f.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, ".php") {
		if f.status != 0 {
			w.WriteHeader(f.status)
		}
		fmt.Fprint(w, f.page)
		return
	}
	if r.Header.Get("If-Modified-Since") == olio.StaticModTime.Format(http.TimeFormat) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	fmt.Fprint(w, "static bytes")
}

const fakePage = `<!DOCTYPE html><html><head><link rel="stylesheet" href="/static/css/site.css">
<script src="/static/js/prototype.js"></script></head><body>
<img src="/static/img/logo.png" alt=""> <img src="/static/img/logo.png" alt="">
<li class="event" data-event="12"><a href="events.php?socialEventID=12"><img src="/files/e12t.jpg" alt=""></a></li>
<li class="event" data-event="13"><img src="/files/e13t.jpg" alt=""> <a href="/files/e13.pdf">doc</a></li>
</body></html>
`

func newFake(t *testing.T, page string, status int) (*fakeSite, *Site) {
	t.Helper()
	f := &fakeSite{requests: map[string]int{}, ims: map[string]int{}, page: page, status: status}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := NewSite(SiteConfig{Base: srv.URL, Counts: olio.CountsFor(25), Users: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return f, s
}

// userWith returns a user whose cache is warm (conditional) or not.
func userWith(s *Site, conditional bool) *User {
	for seed := uint64(0); ; seed++ {
		u := s.NewUser(1, rand.New(rand.NewPCG(seed, 0)), nil)
		if u.Conditional() == conditional {
			return u
		}
	}
}

func TestBrowserCache(t *testing.T) {
	ctx := context.Background()
	for _, conditional := range []bool{true, false} {
		f, s := newFake(t, fakePage, 0)
		u := userWith(s, conditional)
		for range 3 {
			if err := u.HomePage(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string]int{"/index.php": 3, "/files/e12t.jpg": 1, "/files/e13t.jpg": 1}
		statics := 1 // each static once per session
		if conditional {
			statics = 3 // revalidated with every page
		}
		for _, p := range []string{"/static/css/site.css", "/static/js/prototype.js", "/static/img/logo.png"} {
			want[p] = statics
		}
		if fmt.Sprint(f.requests) != fmt.Sprint(want) {
			t.Errorf("conditional=%v: requests %v, want %v", conditional, f.requests, want)
		}
		wantIMS := 0
		if conditional {
			wantIMS = 3
		}
		if f.ims["/static/css/site.css"] != wantIMS || f.ims["/files/e12t.jpg"] != 0 || f.ims["/index.php"] != 0 {
			t.Errorf("conditional=%v: If-Modified-Since sent %v", conditional, f.ims)
		}
		if fmt.Sprint(u.events) != "[12 13]" {
			t.Errorf("events remembered %v, want [12 13]", u.events)
		}
		// A new session fetches the images again.
		u.NewSession()
		if err := u.HomePage(ctx); err != nil {
			t.Fatal(err)
		}
		if f.requests["/files/e12t.jpg"] != 2 {
			t.Errorf("conditional=%v: image fetched %d times over two sessions, want 2", conditional, f.requests["/files/e12t.jpg"])
		}
	}
}

func TestConditionalShare(t *testing.T) {
	_, s := newFake(t, fakePage, 0)
	r := rand.New(rand.NewPCG(5, 5))
	n := 0
	for i := range 10000 {
		if s.NewUser(i, r, nil).Conditional() {
			n++
		}
	}
	if n < 5800 || n > 6200 {
		t.Errorf("%d of 10000 users revalidate statics, want about 6000", n)
	}
}

func TestFailedRequests(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, page string
		status     int
		cause      string
		detail     string
	}{
		{"error status", "\nOLIO-ERROR: no event 77\n", 404, "HTTP 404", "no event 77"},
		{"server error without marker", "<html><body><h1>502 Bad Gateway</h1></body></html>", 502, "HTTP 502", "502 Bad Gateway"},
		{"marker with 200", "<html>\nOLIO-ERROR: mysqli_sql_exception: gone\n</html>", 0, "error page", "mysqli_sql_exception: gone"},
		{"PHP warning", "<html><br />\n<b>Warning</b>:  Undefined variable $x in <b>/srv/www/index.php</b> on line <b>3</b><br /></html>", 0,
			"PHP error", "Warning:  Undefined variable $x in /srv/www/index.php on line 3"},
		{"PHP fatal error as text", "PHP Fatal error:  Uncaught Error: Call to undefined function imagecreatefromjpeg()\n", 0,
			"PHP error", "Fatal error:  Uncaught Error"},
		{"truncated", "<!DOCTYPE html><html><body><p>half a pa", 0, "truncated", "without </html>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := newFake(t, c.page, c.status)
			u := userWith(s, false)
			rec := newCounter()
			err := u.Run(ctx, rec, HomePage)
			if err == nil {
				t.Fatal("the operation succeeded")
			}
			var re *RequestError
			if !errors.As(err, &re) || Cause(err) != c.cause || !strings.Contains(err.Error(), c.detail) ||
				!strings.HasPrefix(err.Error(), "HomePage: GET /index.php: ") {
				t.Errorf("error %q (cause %q), want cause %q and %q", err, Cause(err), c.cause, c.detail)
			}
			if rec.fails["HomePage"] != 1 {
				t.Errorf("recorder counted %v failures", rec.fails)
			}
		})
	}
	if Cause(errors.New("x")) != "other" {
		t.Error("Cause of a plain error")
	}
}

func TestLoginChecksTheHomePage(t *testing.T) {
	// The fake answers 200 to login.php: not the redirect Olio sends.
	_, s := newFake(t, fakePage, 0)
	u := userWith(s, false)
	err := u.Login(context.Background())
	if err == nil || !strings.Contains(err.Error(), "POST /login.php: unexpected page: HTTP 200, want a redirect") {
		t.Errorf("got %v", err)
	}
	if u.LoggedIn() != "" {
		t.Errorf("logged in as %q after a failed login", u.LoggedIn())
	}
}

func TestSiteConfigValidate(t *testing.T) {
	ok := SiteConfig{Base: "http://127.0.0.1:8080", Counts: olio.CountsFor(25), Users: 10}
	for _, c := range []struct {
		name string
		mod  func(*SiteConfig)
		want string
	}{
		{"ok", func(*SiteConfig) {}, ""},
		{"https", func(c *SiteConfig) { c.Base = "https://x:1" }, "want http://host:port"},
		{"path", func(c *SiteConfig) { c.Base = "http://x:1/olio" }, "want http://host:port"},
		{"no data", func(c *SiteConfig) { c.Counts = olio.Counts{} }, "at least one person"},
		{"no users", func(c *SiteConfig) { c.Users = 0 }, "at least 1"},
		{"share", func(c *SiteConfig) { c.ConditionalShare = 1.5 }, "at most 1"},
	} {
		cfg := ok
		c.mod(&cfg)
		err := cfg.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestNextStartsAtHome(t *testing.T) {
	_, s := newFake(t, fakePage, 0)
	u := s.NewUser(1, rand.New(rand.NewPCG(1, 1)), nil)
	if op := u.Next(); op != HomePage {
		t.Errorf("first operation %s, want HomePage", op)
	}
	for range 100 {
		prev := u.prev
		next := u.Next()
		if DefaultMatrix[prev][next] == 0 {
			t.Fatalf("%s followed %s, which the matrix forbids", next, prev)
		}
	}
	u.NewSession()
	if op := u.Next(); op != HomePage {
		t.Errorf("a new session's first operation %s, want HomePage", op)
	}
}
