package olio

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// GeneratorVersion changes whenever the generated rows or files change; it
// is part of the template key, so a change invalidates cached templates.
const GeneratorVersion = 1

// Generator makes Olio's data for a size, deterministically from its seed:
// the same size gives byte-identical tables on every machine. Each table
// draws from a random stream of its own, so tables can be written in any
// order (and concurrently).
type Generator struct {
	size   Size
	counts Counts
	// eventTags[e-1] are the tag ids of event e, ascending.
	eventTags [][]int32
	// tagEvents[t-1] are the event ids tagged t, ascending.
	tagEvents [][]int32
	// ratings[e-1] are the ratings of event e's comments, in comment order.
	ratings [][]uint8
}

// NewGenerator prepares the generator of a size: the event-tag links and
// the comments' ratings, which two tables each need, are drawn here.
func NewGenerator(s Size) (*Generator, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := CountsFor(s.Users)
	g := &Generator{size: s, counts: c,
		eventTags: make([][]int32, c.Events), tagEvents: make([][]int32, c.Tags), ratings: make([][]uint8, c.Events)}
	r := g.stream("event tags")
	for e := range c.Events {
		n := between(r, MinEventTags, min(MaxEventTags, c.Tags))
		tags := distinct(r, n, c.Tags, 0)
		g.eventTags[e] = tags
		for _, t := range tags {
			g.tagEvents[t-1] = append(g.tagEvents[t-1], int32(e+1))
		}
	}
	r = g.stream("ratings")
	for e := range c.Events {
		n := between(r, MinComments, MaxComments)
		g.ratings[e] = make([]uint8, n)
		for i := range g.ratings[e] {
			g.ratings[e][i] = uint8(between(r, MinRating, MaxRating))
		}
	}
	return g, nil
}

// Counts returns the entity counts of the generator's size.
func (g *Generator) Counts() Counts { return g.counts }

// Table is one table of the data set as the loader fills it.
type Table struct {
	Name    string
	Columns []string
	write   func(g *Generator, w *rowWriter)
}

// Tables lists the tables in load order, each with its columns in the order
// Write emits them.
func (g *Generator) Tables() []Table {
	return []Table{
		{"address", []string{"addressid", "street1", "street2", "city", "state", "zip", "country", "latitude", "longitude"}, (*Generator).writeAddresses},
		{"person", []string{"userid", "username", "password", "firstname", "lastname", "email", "telephone", "imageurl", "imagethumburl", "summary", "timezone", "address_addressid"}, (*Generator).writePersons},
		{"person_person", []string{"person_userid", "friends_userid", "is_accepted"}, (*Generator).writeFriends},
		{"socialevent", []string{"socialeventid", "title", "description", "submittername", "imageurl", "imagethumburl", "literatureurl", "telephone", "timezone", "eventtimestamp", "eventdate", "summary", "createdtimestamp", "address_addressid", "totalscore", "numberofvotes"}, (*Generator).writeEvents},
		{"socialeventtag", []string{"socialeventtagid", "tag", "refcount"}, (*Generator).writeTags},
		{"socialeventtag_socialevent", []string{"socialeventtagid", "socialeventid"}, (*Generator).writeEventTags},
		{"person_socialevent", []string{"socialeventid", "username"}, (*Generator).writeAttendees},
		{"comments_rating", []string{"commentid", "username", "socialeventid", "comments", "ratings", "created_at", "updated_at"}, (*Generator).writeComments},
	}
}

// Write writes table as tab-separated rows in the format of MariaDB's LOAD
// DATA defaults (fields ended by tab, escaped with backslash, lines ended by
// newline) and returns the number of rows.
func (g *Generator) Write(table string, w io.Writer) (int64, error) {
	for _, t := range g.Tables() {
		if t.Name == table {
			rw := &rowWriter{w: bufio.NewWriterSize(w, 256<<10)}
			t.write(g, rw)
			if rw.err == nil {
				rw.err = rw.w.Flush()
			}
			return rw.rows, rw.err
		}
	}
	return 0, fmt.Errorf("olio: no table %q", table)
}

// stream returns the random stream of one table (or shared draw), seeded
// from the size's seed and the stream's name.
func (g *Generator) stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(g.size.Seed, h.Sum64()))
}

func (g *Generator) writeAddresses(w *rowWriter) {
	r := g.stream("address")
	for id := 1; id <= g.counts.Persons+g.counts.Events; id++ {
		w.int(id)
		w.str(strconv.Itoa(between(r, 1, 9999)) + " " + pick(r, streets))
		if r.IntN(4) == 0 {
			w.str("Apt " + strconv.Itoa(between(r, 1, 999)))
		} else {
			w.str("")
		}
		w.str(pick(r, cities))
		w.str(pick(r, states))
		w.str(fmt.Sprintf("%05d", r.IntN(100000)))
		w.str(pick(r, countries))
		w.fixed(r.Float64()*180-90, 6)
		w.fixed(r.Float64()*360-180, 6)
		w.end()
	}
}

func (g *Generator) writePersons(w *rowWriter) {
	r := g.stream("person")
	for id := 1; id <= g.counts.Persons; id++ {
		name := UserName(id)
		w.int(id)
		w.str(name)
		w.str(Password(id))
		w.str(pick(r, firstNames))
		w.str(pick(r, lastNames))
		w.str(name + "@example.com")
		w.str(phone(r))
		w.str(PersonImage(id))
		w.str(PersonThumb(id))
		w.str(text(r, 50, 500))
		w.str(pick(r, timezones))
		w.int(id) // the person's address
		w.end()
	}
}

func (g *Generator) writeFriends(w *rowWriter) {
	r := g.stream("friends")
	for id := 1; id <= g.counts.Persons; id++ {
		n := between(r, MinFriends, min(MaxFriends, g.counts.Persons-1))
		for _, f := range distinct(r, n, g.counts.Persons, id) {
			w.int(id)
			w.int(int(f))
			w.int(1)
			w.end()
		}
	}
}

func (g *Generator) writeEvents(w *rowWriter) {
	r := g.stream("socialevent")
	for id := 1; id <= g.counts.Events; id++ {
		at := EventTime(r)
		created := at.Add(-time.Duration(between(r, 1, 180)) * 24 * time.Hour)
		score := 0
		for _, v := range g.ratings[id-1] {
			score += int(v)
		}
		w.int(id)
		w.str(title(r))
		w.str(text(r, 100, 495))
		w.str(UserName(between(r, 1, g.counts.Persons)))
		w.str(EventImage(id))
		w.str(EventThumb(id))
		w.str(EventLiterature(id))
		w.str(phone(r))
		w.str(pick(r, timezones))
		w.str(at.Format(sqlTime))
		w.str(at.Format("2006-01-02"))
		w.str(text(r, 20, 100))
		w.str(created.Format(sqlTime))
		w.int(g.counts.Persons + id) // the event's address
		w.int(score)
		w.int(len(g.ratings[id-1]))
		w.end()
	}
}

func (g *Generator) writeTags(w *rowWriter) {
	for id := 1; id <= g.counts.Tags; id++ {
		w.int(id)
		w.str(TagName(id))
		w.int(len(g.tagEvents[id-1]))
		w.end()
	}
}

func (g *Generator) writeEventTags(w *rowWriter) {
	for t, events := range g.tagEvents {
		for _, e := range events {
			w.int(t + 1)
			w.int(int(e))
			w.end()
		}
	}
}

func (g *Generator) writeAttendees(w *rowWriter) {
	r := g.stream("attendees")
	names := make([]string, 0, MaxAttendees)
	for id := 1; id <= g.counts.Events; id++ {
		n := between(r, MinAttendees, min(MaxAttendees, g.counts.Persons))
		names = names[:0]
		for _, p := range distinct(r, n, g.counts.Persons, 0) {
			names = append(names, UserName(int(p)))
		}
		slices.Sort(names) // primary key order: (socialeventid, username)
		for _, name := range names {
			w.int(id)
			w.str(name)
			w.end()
		}
	}
}

func (g *Generator) writeComments(w *rowWriter) {
	r := g.stream("comments")
	cid := 0
	for id := 1; id <= g.counts.Events; id++ {
		for _, rating := range g.ratings[id-1] {
			cid++
			at := Epoch.Add(-time.Duration(r.IntN(365*24*60)) * time.Minute)
			w.int(cid)
			w.str(UserName(between(r, 1, g.counts.Persons)))
			w.int(id)
			w.str(text(r, 20, 200))
			w.int(int(rating))
			w.str(at.Format(sqlTime))
			w.str(at.Format(sqlTime))
			w.end()
		}
	}
}

const sqlTime = "2006-01-02 15:04:05"

// EventTime draws an event's date and time: up to 90 days before Epoch to a
// year after it, on a quarter hour (most events are upcoming, as on a live
// site). The driver's AddEvent draws its dates with it too.
func EventTime(r *rand.Rand) time.Time {
	q := between(r, -90*24*4, 365*24*4-1)
	return Epoch.Add(time.Duration(q) * 15 * time.Minute)
}

// File names of the file store: the generator and the site name an entity's
// files after its id.

// PersonImage is the file of person id's photo.
func PersonImage(id int) string { return "p" + strconv.Itoa(id) + ".jpg" }

// PersonThumb is the file of person id's thumbnail.
func PersonThumb(id int) string { return "p" + strconv.Itoa(id) + "t.jpg" }

// EventImage is the file of event id's image.
func EventImage(id int) string { return "e" + strconv.Itoa(id) + ".jpg" }

// EventThumb is the file of event id's thumbnail.
func EventThumb(id int) string { return "e" + strconv.Itoa(id) + "t.jpg" }

// EventLiterature is the file of event id's document (PDF).
func EventLiterature(id int) string { return "e" + strconv.Itoa(id) + ".pdf" }

// between draws an int uniformly from [lo, hi].
func between(r *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.IntN(hi-lo+1)
}

func pick(r *rand.Rand, list []string) string { return list[r.IntN(len(list))] }

// distinct draws n distinct ids from 1..max, none equal to except, sorted.
func distinct(r *rand.Rand, n, max, except int) []int32 {
	out := make([]int32, 0, n)
	seen := make(map[int32]bool, n)
	for len(out) < n {
		v := int32(1 + r.IntN(max))
		if int(v) == except || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func phone(r *rand.Rand) string {
	return fmt.Sprintf("%03d-%03d-%04d", between(r, 200, 999), between(r, 200, 999), r.IntN(10000))
}

// text draws lorem-like words up to a length in [lo, hi] characters.
func text(r *rand.Rand, lo, hi int) string {
	n := between(r, lo, hi)
	b := make([]byte, 0, n+16)
	for len(b) < n {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, pick(r, loremWords)...)
	}
	b = b[:n]
	if b[n-1] == ' ' {
		b[n-1] = '.'
	}
	return string(b)
}

func title(r *rand.Rand) string {
	n := between(r, 2, 6)
	b := make([]byte, 0, 64)
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		w := pick(r, loremWords)
		if i == 0 {
			b = append(b, w[0]-'a'+'A')
			w = w[1:]
		}
		b = append(b, w...)
	}
	return string(b)
}

// rowWriter formats rows for LOAD DATA; the first error sticks.
type rowWriter struct {
	w     *bufio.Writer
	buf   []byte
	first bool
	rows  int64
	err   error
}

func (w *rowWriter) sep() {
	if w.first {
		w.buf = append(w.buf, '\t')
	}
	w.first = true
}

func (w *rowWriter) int(v int) {
	w.sep()
	w.buf = strconv.AppendInt(w.buf, int64(v), 10)
}

func (w *rowWriter) fixed(v float64, prec int) {
	w.sep()
	w.buf = strconv.AppendFloat(w.buf, v, 'f', prec, 64)
}

// str appends a text field, escaping what LOAD DATA would read as syntax.
func (w *rowWriter) str(s string) {
	w.sep()
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			w.buf = append(w.buf, '\\', '\\')
		case '\t':
			w.buf = append(w.buf, '\\', 't')
		case '\n':
			w.buf = append(w.buf, '\\', 'n')
		case 0:
			w.buf = append(w.buf, '\\', '0')
		default:
			w.buf = append(w.buf, c)
		}
	}
}

func (w *rowWriter) end() {
	w.buf = append(w.buf, '\n')
	w.first = false
	w.rows++
	if w.err == nil {
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
}
