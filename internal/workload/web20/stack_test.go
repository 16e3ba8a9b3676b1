package web20

import (
	"bytes"
	"context"
	"fmt"
	"image/jpeg"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/apps/olio/oliotest"
	"github.com/nearnative/nearnative/internal/testenv"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the supervisor of containers that hold
	// several servers (it is bind-mounted into them) and as a child driver
	// process (testenv.UseTestDrivers).
	testenv.Main(m, oliotest.Teardown)
}

// requestCounter counts the requests a user sends, per operation.
type requestCounter struct {
	rt http.RoundTripper
	mu sync.Mutex
	n  int
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

// TestEveryOperationNative drives every operation once against the real
// stack (MariaDB, PHP-FPM, nginx started natively from a copy of the
// template) and checks what each changed in the database and file store.
func TestEveryOperationNative(t *testing.T) {
	e := oliotest.Setup(t)
	st, err := oliotest.Start(t, e, "ops", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	counts := e.Template.Meta.Counts
	site, err := NewSite(SiteConfig{Base: st.Base, Counts: counts, Users: 1, AttendChance: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	u := userWith(site, false) // a cold cache: every static is fetched once
	rc := &requestCounter{rt: u.client.Transport}
	u.client.Transport = rc

	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := st.DB.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	persons, events := count("SELECT COUNT(*) FROM person"), count("SELECT COUNT(*) FROM socialevent")

	rec := newCounter()
	requests := map[Op]int{}
	for _, op := range Ops {
		before := rc.n
		if err := u.Run(ctx, rec, op); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		requests[op] = rc.n - before
	}
	t.Logf("requests per operation, first time in a session: %v", requests)
	for _, op := range Ops {
		if rec.ops[op.String()] != 1 {
			t.Errorf("recorder saw %s %d times", op, rec.ops[op.String()])
		}
	}
	// Olio's: ~20 requests per operation with a cold cache (the page, ~18
	// statics, thumbnails); Login is its POST and the home page.
	if requests[HomePage] < 19 || requests[Login] != 2 || requests[TagSearch] < 2 || requests[EventDetail] < 5 ||
		requests[AddPerson] < 2 || requests[AddEvent] < 2 {
		t.Errorf("requests per operation %v", requests)
	}

	// Login and EventDetail: an attendee recorded.
	if u.LoggedIn() == "" {
		t.Fatal("not logged in after Login")
	}
	if u.LastAttended == 0 {
		t.Errorf("EventDetail did not attend (the logged-in user %s may attend its event already)", u.LoggedIn())
	} else if n := count("SELECT COUNT(*) FROM person_socialevent WHERE socialeventid = ? AND username = ?", u.LastAttended, u.LoggedIn()); n != 1 {
		t.Errorf("attendee %s of event %d: %d rows", u.LoggedIn(), u.LastAttended, n)
	}

	// AddPerson: a person added, with the photo and a GD thumbnail.
	if got := count("SELECT COUNT(*) FROM person"); got != persons+1 {
		t.Errorf("%d persons after AddPerson, want %d", got, persons+1)
	}
	var uid int
	var image, thumb string
	if err := st.DB.QueryRowContext(ctx, "SELECT userid, imageurl, imagethumburl FROM person WHERE username = ?", u.LastPerson).
		Scan(&uid, &image, &thumb); err != nil {
		t.Fatalf("the added person %q: %v", u.LastPerson, err)
	}
	if image != fmt.Sprintf("p%d.jpg", uid) || thumb != fmt.Sprintf("p%dt.jpg", uid) {
		t.Errorf("added person's files %q %q", image, thumb)
	}
	checkJPEG(t, filepath.Join(st.SiteDir, "files", thumb), olio.ThumbWidth, olio.ThumbHeight)
	checkJPEG(t, filepath.Join(st.SiteDir, "files", image), olio.ImageWidth, olio.ImageHeight)

	// AddEvent: an event added by the logged-in user with its tags.
	if got := count("SELECT COUNT(*) FROM socialevent"); got != events+1 {
		t.Errorf("%d events after AddEvent, want %d", got, events+1)
	}
	if n := count("SELECT COUNT(*) FROM socialevent WHERE socialeventid = ? AND submittername = ?", u.LastEvent, u.LoggedIn()); n != 1 {
		t.Errorf("event %d by %s: %d rows", u.LastEvent, u.LoggedIn(), n)
	}
	rows, err := st.DB.QueryContext(ctx, `SELECT t.tag FROM socialeventtag_socialevent st
		JOIN socialeventtag t ON t.socialeventtagid = st.socialeventtagid WHERE st.socialeventid = ? ORDER BY t.tag`, u.LastEvent)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var tag string
		rows.Scan(&tag)
		got = append(got, tag)
	}
	rows.Close()
	want := slices.Clone(u.LastEventTags)
	slices.Sort(want)
	if len(want) < 1 || len(want) > 7 || !slices.Equal(got, want) {
		t.Errorf("event %d has tags %v, the driver sent %v", u.LastEvent, got, want)
	}
	checkJPEG(t, filepath.Join(st.SiteDir, "files", fmt.Sprintf("e%dt.jpg", u.LastEvent)), olio.ThumbWidth, olio.ThumbHeight)
	if b, err := os.ReadFile(filepath.Join(st.SiteDir, "files", fmt.Sprintf("e%d.pdf", u.LastEvent))); err != nil || !bytes.HasPrefix(b, []byte("%PDF")) {
		t.Errorf("the event's document: %v", err)
	}

	// The new event and person are served.
	u.events = []int{u.LastEvent}
	if err := u.Run(ctx, rec, EventDetail); err != nil {
		t.Errorf("EventDetail of the added event: %v", err)
	}

	// A failed request fails its operation with the cause.
	site2, _ := NewSite(SiteConfig{Base: st.Base, Counts: olio.Counts{Persons: 1, Tags: 1, Events: 1 << 30}, Users: 1})
	defer site2.Close()
	v := site2.NewUser(2, rand.New(rand.NewPCG(9, 9)), nil)
	err = v.Run(ctx, rec, EventDetail)
	if err == nil || Cause(err) != "HTTP 404" || !strings.Contains(err.Error(), "/events.php?socialEventID=") || !strings.Contains(err.Error(), ": no event ") {
		t.Errorf("EventDetail of a missing event: %v (cause %q)", err, Cause(err))
	}
	err = v.Run(ctx, rec, AddEvent)
	if err == nil || Cause(err) != "HTTP 403" || !strings.Contains(err.Error(), "needs a logged-in user") {
		t.Errorf("AddEvent without login: %v (cause %q)", err, Cause(err))
	}
}

// TestUsersConcurrently runs a few users along the chain at once against
// the real stack, without pacing: no operation may fail.
func TestUsersConcurrently(t *testing.T) {
	e := oliotest.Setup(t)
	st, err := oliotest.Start(t, e, "users", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const users, steps = 4, 40
	site, err := NewSite(SiteConfig{Base: st.Base, Counts: e.Template.Meta.Counts, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	var wg sync.WaitGroup
	recs := make([]*counter, users)
	for i := range users {
		recs[i] = newCounter()
		u := site.NewUser(i+1, rand.New(rand.NewPCG(uint64(i), 77)), nil)
		wg.Go(func() {
			for range steps {
				u.Run(ctx, recs[i], u.Next())
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	total := map[string]int{}
	for _, r := range recs {
		for op, n := range r.ops {
			total[op] += n
		}
		for _, err := range r.errs {
			t.Errorf("%v", err)
		}
	}
	// The driver's own cost (this test process runs only the clients; the
	// servers are processes of their own).
	t.Logf("%d operations in %v (%v): %v; client CPU %v, %v per operation",
		users*steps, wall.Round(time.Millisecond), e.Template.Meta.Size, total, cpu.Round(time.Millisecond), cpu/time.Duration(users*steps))
}

func checkJPEG(t *testing.T, path string, maxW, maxH int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	c, err := jpeg.DecodeConfig(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if c.Width > maxW || c.Height > maxH || c.Width < maxW/2 {
		t.Errorf("%s is %dx%d, want within %dx%d", path, c.Width, c.Height, maxW, maxH)
	}
}
