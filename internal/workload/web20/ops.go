package web20

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/apps/olio"
)

// Next draws the user's next operation from the Markov chain (HomePage
// first in a session) and makes it the current one. The driver paces it
// (MinCycle of the operation) and then runs it with Run.
func (u *User) Next() Op {
	if !u.started {
		u.started, u.prev = true, HomePage
		return HomePage
	}
	u.prev = u.matrix.Next(u.rng, u.prev)
	return u.prev
}

// Run runs op through rec, timed as one operation from its first request
// sent to its last answer read.
func (u *User) Run(ctx context.Context, rec Recorder, op Op) error {
	return rec.Do(ctx, op.String(), u.op(op))
}

func (u *User) op(op Op) func(context.Context) error {
	switch op {
	case HomePage:
		return u.HomePage
	case Login:
		return u.Login
	case TagSearch:
		return u.TagSearch
	case EventDetail:
		return u.EventDetail
	case PersonDetail:
		return u.PersonDetail
	case AddPerson:
		return u.AddPerson
	case AddEvent:
		return u.AddEvent
	}
	return func(context.Context) error { return fmt.Errorf("web20: unknown operation %v", op) }
}

var eventIDs = regexp.MustCompile(`data-event="(\d+)"`)

// rememberEvents keeps the event ids of a list page for EventDetail.
func (u *User) rememberEvents(page []byte) {
	u.events = u.events[:0]
	for _, m := range eventIDs.FindAllSubmatch(page, -1) {
		if id, err := strconv.Atoi(string(m[1])); err == nil {
			u.events = append(u.events, id)
		}
	}
}

// HomePage gets the home page (upcoming events, tag cloud), its statics and
// the event thumbnails not yet fetched.
func (u *User) HomePage(ctx context.Context) error {
	r, err := u.pageWithEmbedded(ctx, "/index.php")
	if err != nil {
		return fmt.Errorf("HomePage: %w", err)
	}
	u.rememberEvents(r.body)
	return nil
}

// Login logs in as a random registered user: POST /login.php, then GET
// /index.php, which fails the operation if it still asks for a user name.
func (u *User) Login(ctx context.Context) error {
	id := 1 + u.rng.IntN(u.site.cfg.Counts.Persons)
	name := olio.UserName(id)
	form := url.Values{"user_name": {name}, "password": {olio.Password(id)}}
	req, err := http.NewRequest(http.MethodPost, u.site.base+"/login.php", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if _, err := u.send(ctx, req, redirectKind); err != nil {
		return fmt.Errorf("Login as %s: %w", name, err)
	}
	r, err := u.get(ctx, "/index.php", pageKind)
	if err != nil {
		return fmt.Errorf("Login as %s: %w", name, err)
	}
	if bytes.Contains(r.body, []byte(`name="user_name"`)) || !bytes.Contains(r.body, []byte(`id="loggedin">`+name+`<`)) {
		return fmt.Errorf("Login as %s: %w", name, &RequestError{Method: "GET", Path: "/index.php", Cause: "unexpected page",
			Detail: "the home page still asks for a user name"})
	}
	u.user = name
	u.rememberEvents(r.body)
	return nil
}

// TagSearch lists the events of a random tag (Olio's driver sends a count
// of 100 to 150 with it), with statics and thumbnails.
func (u *User) TagSearch(ctx context.Context) error {
	tag := olio.TagName(1 + u.rng.IntN(u.site.cfg.Counts.Tags))
	q := url.Values{"tag": {tag}, "count": {strconv.Itoa(100 + u.rng.IntN(51))}}
	r, err := u.pageWithEmbedded(ctx, "/taggedEvents.php?"+q.Encode())
	if err != nil {
		return fmt.Errorf("TagSearch %s: %w", tag, err)
	}
	u.rememberEvents(r.body)
	return nil
}

// EventDetail shows an event of the last list page (a random one when
// none), with statics and images; a logged-in user attends it with
// AttendChance.
func (u *User) EventDetail(ctx context.Context) error {
	id := 1 + u.rng.IntN(u.site.cfg.Counts.Events)
	if len(u.events) > 0 {
		id = u.events[u.rng.IntN(len(u.events))]
	}
	r, err := u.pageWithEmbedded(ctx, "/events.php?socialEventID="+strconv.Itoa(id))
	if err != nil {
		return fmt.Errorf("EventDetail %d: %w", id, err)
	}
	if u.user == "" || u.rng.Float64() >= u.site.cfg.AttendChance || !bytes.Contains(r.body, []byte(`id="attend"`)) {
		return nil
	}
	path := "/addAttendee.php?socialEventID=" + strconv.Itoa(id)
	a, err := u.get(ctx, path, fragmentKind)
	if err != nil {
		return fmt.Errorf("EventDetail %d, attending: %w", id, err)
	}
	if !bytes.Contains(a.body, []byte(`id="attending"`)) {
		return fmt.Errorf("EventDetail %d: %w", id, &RequestError{Method: "GET", Path: path, Cause: "unexpected page",
			Detail: "the answer does not confirm the attendance"})
	}
	u.LastAttended = id
	return nil
}

// PersonDetail shows a random registered user's page (photo, friends'
// thumbnails) with statics and images.
func (u *User) PersonDetail(ctx context.Context) error {
	name := olio.UserName(1 + u.rng.IntN(u.site.cfg.Counts.Persons))
	if _, err := u.pageWithEmbedded(ctx, "/users.php?username="+url.QueryEscape(name)); err != nil {
		return fmt.Errorf("PersonDetail %s: %w", name, err)
	}
	return nil
}

var (
	addedPerson = regexp.MustCompile(`id="added-person">([^<]+)<`)
	addedEvent  = regexp.MustCompile(`id="added-event">(\d+)<`)
)

// AddPerson registers a new person: the form with its statics, then a
// multipart POST with a JPEG photo (the site makes its thumbnail).
func (u *User) AddPerson(ctx context.Context) error {
	if _, err := u.pageWithEmbedded(ctx, "/addPerson.php"); err != nil {
		return fmt.Errorf("AddPerson: %w", err)
	}
	u.added++
	name := fmt.Sprintf("n%d_%d", u.id, u.added) // unique in the driver run; not a loaded name
	if u.site.cfg.Tag != "" {
		name += "_" + u.site.cfg.Tag // unique across the runs on the same data
	}
	form := [][2]string{
		{"user_name", name}, {"password", "pw" + name}, {"passwordx", "pw" + name},
		{"first_name", "New"}, {"last_name", fmt.Sprintf("User%d", u.id)}, {"email", name + "@example.com"},
		{"telephone", fmt.Sprintf("555-%03d-%04d", u.rng.IntN(1000), u.rng.IntN(10000))},
		{"timezone", "America/Los_Angeles"}, {"summary", "Registered by nearnative's web20 driver."},
		{"street1", fmt.Sprintf("%d Main St", 1+u.rng.IntN(9999))}, {"street2", ""}, {"city", "Springfield"},
		{"state", "CA"}, {"zip", fmt.Sprintf("%05d", u.rng.IntN(100000))}, {"country", "USA"},
	}
	files := []upload{{"user_image", "photo.jpg", "image/jpeg", olio.SampleImage(u.rng.IntN(olio.PoolSize))}}
	r, err := u.postMultipart(ctx, "/addPerson.php", form, files)
	if err != nil {
		return fmt.Errorf("AddPerson %s: %w", name, err)
	}
	m := addedPerson.FindSubmatch(r.body)
	if m == nil || string(m[1]) != name {
		return fmt.Errorf("AddPerson %s: %w", name, &RequestError{Method: "POST", Path: "/addPerson.php", Cause: "unexpected page",
			Detail: "the answer does not confirm the new person"})
	}
	u.LastPerson = name
	return nil
}

// AddEvent adds an event as the logged-in user: the form with its statics,
// then a multipart POST with a JPEG, a PDF and 1 to 7 tags.
func (u *User) AddEvent(ctx context.Context) error {
	if _, err := u.pageWithEmbedded(ctx, "/addEvent.php"); err != nil {
		return fmt.Errorf("AddEvent: %w", err)
	}
	n := 1 + u.rng.IntN(7)
	var tagList []string
	seen := map[string]bool{}
	for len(tagList) < min(n, u.site.cfg.Counts.Tags) {
		t := olio.TagName(1 + u.rng.IntN(u.site.cfg.Counts.Tags))
		if !seen[t] {
			seen[t] = true
			tagList = append(tagList, t)
		}
	}
	at := olio.EventTime(u.rng)
	form := [][2]string{
		{"title", fmt.Sprintf("Event of user %d", u.id)}, {"summary", "Added by nearnative's web20 driver."},
		{"description", "An event added during a benchmark run, with an image, a document and tags."},
		{"telephone", fmt.Sprintf("555-%03d-%04d", u.rng.IntN(1000), u.rng.IntN(10000))}, {"timezone", "America/New_York"},
		{"year", strconv.Itoa(at.Year())}, {"month", strconv.Itoa(int(at.Month()))}, {"day", strconv.Itoa(at.Day())},
		{"hour", strconv.Itoa(at.Hour())}, {"minute", strconv.Itoa(at.Minute())},
		{"street1", fmt.Sprintf("%d Park Ave", 1+u.rng.IntN(9999))}, {"street2", ""}, {"city", "Riverton"},
		{"state", "WA"}, {"zip", fmt.Sprintf("%05d", u.rng.IntN(100000))}, {"country", "USA"},
		{"tags", strings.Join(tagList, " ")},
	}
	k := u.rng.IntN(olio.PoolSize)
	files := []upload{
		{"upload_event_image", "event.jpg", "image/jpeg", olio.SampleImage(k)},
		{"upload_event_literature", "event.pdf", "application/pdf", olio.SampleDocument(k)},
	}
	r, err := u.postMultipart(ctx, "/addEvent.php", form, files)
	if err != nil {
		return fmt.Errorf("AddEvent: %w", err)
	}
	m := addedEvent.FindSubmatch(r.body)
	if m == nil {
		return fmt.Errorf("AddEvent: %w", &RequestError{Method: "POST", Path: "/addEvent.php", Cause: "unexpected page",
			Detail: "the answer does not confirm the new event"})
	}
	u.LastEvent, _ = strconv.Atoi(string(m[1]))
	u.LastEventTags = tagList
	return nil
}

type upload struct {
	field, filename, contentType string
	data                         []byte
}

// postMultipart posts a multipart/form-data form with files.
func (u *User) postMultipart(ctx context.Context, path string, fields [][2]string, files []upload) (*response, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, f.field, f.filename))
		h.Set("Content-Type", f.contentType)
		p, err := w.CreatePart(h)
		if err != nil {
			return nil, err
		}
		if _, err := p.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, u.site.base+path, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	return u.send(ctx, req, pageKind)
}
