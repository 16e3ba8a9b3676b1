// Package olio is nearnative's own implementation of the Olio social-events
// site that CloudStone drives (the seed "Scaling Web 2.0 Applications using
// Docker containers on vSphere 6.0"): PHP pages on nginx and PHP-FPM over a
// MariaDB database with Olio's tables, the files (event images, person
// photos, event documents) on the web tier's storage path.
//
// The package holds the site's sources (PHP, CSS, SQL and configuration
// templates, embedded), builds the server specs of the three tiers
// (MariaDBSpec, FPMSpec, NginxSpec) with a readiness probe for each, and
// generates Olio's data deterministically from a seed at a named size,
// loading it once into a cached template (a MariaDB data directory plus the
// file store) that every trial copies (EnsureTemplate, Template.CopyDB,
// Template.CopySite). The clients and the user model are in
// internal/workload/web20.
package olio

import (
	"embed"
	"fmt"
	"math"
	"time"
)

//go:embed php/*.php static conf/*.tmpl sql/*.sql
var sources embed.FS

// Database, user and password of the application. The password is fixed:
// servers listen only on loopback or on networks nearnative made.
const (
	DBName     = "olio"
	DBUser     = "olio"
	DBPassword = "olio"
)

// Epoch is the site's "today": events are dated around it and the home page
// lists those on or after it, so that a template gives the same pages
// whatever the calendar says (Olio dated its data around the load date).
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// StaticModTime is the modification time of every static file of the site.
// A browser with a warm cache revalidates with exactly this date in
// If-Modified-Since, and nginx answers 304 Not Modified.
var StaticModTime = time.Date(2008, 10, 1, 0, 0, 0, 0, time.UTC)

// Olio's scale rules (apps.md, "Olio / CloudStone: Loader").
const (
	// UsersPerConcurrentUser registered users are loaded per concurrent user.
	UsersPerConcurrentUser = 100
	// MinUsers is the smallest number of concurrent users Olio loads for.
	MinUsers = 25
	// MaxUsers bounds a size to what one machine can load (15 M registered
	// users, some 60 GB of database); it only catches typos.
	MaxUsers = 150000
	// EventsPerTag events are generated per tag.
	EventsPerTag = 3
	tagScale     = 5000.0
	tagSpread    = 10000.0
)

// Per-entity ranges of the generator (apps.md, "Loader"; inclusive).
const (
	MinFriends, MaxFriends     = 2, 28
	MinEventTags, MaxEventTags = 1, 7
	MinAttendees, MaxAttendees = 10, 100
	MinComments, MaxComments   = 0, 20
	MinRating, MaxRating       = 2, 5
)

// Size names a data set: the number of concurrent users it is loaded for and
// the seed of the generator.
type Size struct {
	Users int    // concurrent users (Olio's scale); the seed's is 1500
	Seed  uint64 // generator seed
}

// Validate reports a size the loader cannot make.
func (s Size) Validate() error {
	if s.Users < MinUsers || s.Users > MaxUsers {
		return fmt.Errorf("olio data size %d users: want %d to %d concurrent users (Olio loads at least %d)", s.Users, MinUsers, MaxUsers, MinUsers)
	}
	return nil
}

// Fits reports whether a load of users concurrent users (per instance) fits
// the data loaded for s: Olio's data is sized for a number of users, and
// more would log in and browse beyond it.
func (s Size) Fits(users int) error {
	if users < 1 {
		return fmt.Errorf("%d users per instance: want at least 1", users)
	}
	if users > s.Users {
		return fmt.Errorf("%d users per instance exceed the %d the Olio data is loaded for: load the data for at least %d", users, s.Users, users)
	}
	return nil
}

// String is "1500 users, seed 1".
func (s Size) String() string { return fmt.Sprintf("%d users, seed %d", s.Users, s.Seed) }

// Counts are the numbers of rows of the main entities for a size.
type Counts struct {
	Persons int // registered users, ids 1..Persons
	Tags    int // tags, ids 1..Tags
	Events  int // social events, ids 1..Events
}

// CountsFor applies Olio's scale rules to a number of concurrent users:
// registered users = 100 x users; tags = round(5000 x the half-logistic CDF
// of the registered users at scale 10000), i.e. 5000(1-e^-x)/(1+e^-x) with
// x = registered/10000; events = 3 x tags.
func CountsFor(users int) Counts {
	persons := users * UsersPerConcurrentUser
	x := float64(persons) / tagSpread
	tags := int(math.Round(tagScale * (1 - math.Exp(-x)) / (1 + math.Exp(-x))))
	if tags < 1 {
		tags = 1
	}
	return Counts{Persons: persons, Tags: tags, Events: EventsPerTag * tags}
}

// UserName is the user name of registered user id (1-based); the driver
// logs in and looks people up with it.
func UserName(id int) string { return fmt.Sprintf("user%d", id) }

// Password is the password of registered user id. Olio stored passwords in
// clear; so does this site (it is a benchmark, not a service).
func Password(id int) string { return fmt.Sprintf("pw%d", id) }

// tagSyllables spell tag names: TagName(i) writes i in base 24 with one
// syllable per digit, so that names are unique, word-like and short.
var tagSyllables = []string{"ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lo", "mu", "na", "pe",
	"qui", "ro", "su", "ta", "ve", "wi", "xo", "yu", "za", "bre", "cla", "dro"}

// TagName is the name of tag id (1-based).
func TagName(id int) string {
	n := id
	var b []byte
	for {
		b = append([]byte(tagSyllables[n%len(tagSyllables)]), b...)
		n /= len(tagSyllables)
		if n == 0 {
			break
		}
	}
	return string(b)
}
