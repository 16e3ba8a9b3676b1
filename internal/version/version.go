// Package version reports nearnative's version and the commit it was built
// from (set with -ldflags by the Makefile, else read from Go's build info).
package version

import (
	"runtime/debug"
)

// Set by the Makefile: -X github.com/nearnative/nearnative/internal/version.Version=...
var (
	Version = "dev"
	Commit  = ""
)

// String is "VERSION (COMMIT)".
func String() string {
	c := CommitID()
	if c == "" {
		return Version
	}
	return Version + " (" + c + ")"
}

// CommitID returns the build's VCS revision, with "+dirty" when modified.
func CommitID() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
			if len(rev) > 12 {
				rev = rev[:12]
			}
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
