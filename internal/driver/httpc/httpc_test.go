package httpc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
)

// site is a small web application: a login that sets a cookie, a page that
// needs it, a static file with Last-Modified, an upload form.
func site(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var statics atomic.Int64
	mux := http.NewServeMux()
	modTime := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.FormValue("user") == "" {
			http.Error(w, "who are you", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: r.FormValue("user")})
		http.Redirect(w, r, "/home", http.StatusFound)
	})
	mux.HandleFunc("/home", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("session")
		if err != nil {
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "hello "+c.Value)
	})
	mux.HandleFunc("/static.css", func(w http.ResponseWriter, r *http.Request) {
		statics.Add(1)
		http.ServeContent(w, r, "static.css", modTime, strings.NewReader(strings.Repeat("x", 4096)))
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, h, err := r.FormFile("photo")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(f)
		io.WriteString(w, r.FormValue("title")+" "+h.Filename+" "+h.Header.Get("Content-Type")+" "+string(b))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &statics
}

func TestUserSession(t *testing.T) {
	srv, statics := site(t)
	ctx := KeepBody(context.Background())
	alice, bob := New(Options{}), New(Options{})
	defer alice.Close()
	defer bob.Close()

	if _, err := alice.PostForm(ctx, srv.URL+"/login", url.Values{"user": {"alice"}}); err != nil {
		t.Fatal(err)
	}
	r, err := alice.Get(ctx, srv.URL+"/home")
	if err != nil || string(r.Body) != "hello alice" {
		t.Fatalf("alice's home: %v %q", err, r.Body)
	}
	// Bob has his own cookie jar: not logged in.
	_, err = bob.Get(ctx, srv.URL+"/home")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 401 || driver.Cause(err) != "http 401" {
		t.Errorf("bob's home: %v, want HTTP 401 classified as such", err)
	}

	// Conditional GET: the second fetch revalidates and gets 304.
	r1, err := alice.GetConditional(ctx, srv.URL+"/static.css")
	if err != nil || r1.Status != 200 || r1.Bytes != 4096 {
		t.Fatalf("first static fetch: %v %+v", err, r1)
	}
	r2, err := alice.GetConditional(ctx, srv.URL+"/static.css")
	if err != nil || r2.Status != http.StatusNotModified || r2.Bytes != 0 {
		t.Errorf("revalidation: %v, status %d, %d bytes; want 304 and no body", err, r2.Status, r2.Bytes)
	}
	// GetOnce: one fetch per session.
	statics.Store(0)
	for i := 0; i < 3; i++ {
		if _, _, err := bob.GetOnce(ctx, srv.URL+"/static.css"); err != nil {
			t.Fatal(err)
		}
	}
	if n := statics.Load(); n != 1 {
		t.Errorf("GetOnce fetched %d times", n)
	}

	r, err = alice.PostMultipart(ctx, srv.URL+"/upload", map[string]string{"title": "party"},
		[]File{{Field: "photo", Name: "p.jpg", ContentType: "image/jpeg", Data: []byte("JPEGDATA")}})
	if err != nil || string(r.Body) != "party p.jpg image/jpeg JPEGDATA" {
		t.Errorf("upload: %v %q", err, r.Body)
	}
}

// TestGetBehaviour drives a real HTTP server through the driver's open loop
// with the http-get behaviour.
func TestGetBehaviour(t *testing.T) {
	srv, _ := site(t)
	c := driver.Config{
		Behaviour: GetBehaviour, Params: map[string]string{ParamURL: srv.URL + "/static.css", ParamBytes: "4096"},
		Mode: driver.Open, Plan: driver.Constant(500), Connections: 4,
		Phases: driver.Phases{RampUp: 100 * time.Millisecond, Steady: time.Second},
	}
	for _, client := range []string{"fasthttp", "nethttp"} {
		c.Params[ParamClient] = client
		r, err := driver.Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		g := r.Ops[GetOp]
		if g == nil || g.Count < 490 || g.Count > 510 || g.Failed() != 0 {
			t.Fatalf("%s GETs: %+v", client, g)
		}
	}
	delete(c.Params, ParamClient)
	// Wrong size: every response fails as a short body.
	c.Params[ParamBytes] = "100"
	r, err := driver.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if g := r.Ops[GetOp]; g.Count != 0 || g.Failures["short body"] < 490 {
		t.Errorf("wrong size: %d passed, failures %v", g.Count, g.Failures)
	}
	for _, bad := range []map[string]string{{}, {ParamURL: "ftp://x/"}, {ParamURL: "http://x/", ParamBytes: "-1"}, {ParamURL: "http://x/", ParamClient: "curl"}} {
		c.Params = bad
		if err := c.Validate(); err == nil {
			t.Errorf("params %v accepted", bad)
		}
	}
}
