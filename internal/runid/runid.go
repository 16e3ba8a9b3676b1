// Package runid names a run and the marks that tie every resource nearnative
// creates (containers, networks, processes, cgroups, temp dirs) to the run that
// made it, so that teardown and `nearnative cleanup` can find them again.
package runid

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"
)

const (
	// Label is the Docker label key carrying the run ID on every container and
	// network nearnative creates.
	Label = "nearnative.run"
	// LabelRole is the Docker label key naming what a resource is for.
	LabelRole = "nearnative.role"
	// EnvVar is set in the environment of every native process nearnative
	// starts; cleanup finds orphans by scanning /proc/*/environ for it.
	EnvVar = "NEARNATIVE_RUN"
	// Prefix starts every name nearnative gives to host objects (cgroups,
	// temp dirs, interfaces, namespaces).
	Prefix = "nn-"
)

// ID identifies one run. It sorts by creation time and is short enough to be
// part of interface names.
type ID string

var idPattern = regexp.MustCompile(`^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$`)

// New returns a fresh run ID: UTC time of creation plus 16 random bits.
func New() ID {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Errorf("runid: reading random bytes: %w", err))
	}
	return ID(time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]))
}

// Parse checks that s has the form of a run ID.
func Parse(s string) (ID, error) {
	if !idPattern.MatchString(s) {
		return "", fmt.Errorf("%q is not a run ID (want YYYYMMDD-HHMMSS-xxxx, see `nearnative runs`)", s)
	}
	return ID(s), nil
}

// Valid reports whether id has the form of a run ID. An ID read from outside
// this process (a Docker label, a store row, a file name, an argument) must
// be valid before it names a path, a process or a resource: the form has no
// "/" and no "..", so a valid ID cannot lead a path out of its directory.
func (id ID) Valid() bool { return idPattern.MatchString(string(id)) }

// Short is the random suffix of the ID, for names with tight length limits
// (Linux interface names have 15 bytes).
func (id ID) Short() string {
	s := string(id)
	if len(s) < 4 {
		return s
	}
	return s[len(s)-4:]
}

func (id ID) String() string { return string(id) }
