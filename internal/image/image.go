// Package image builds the workload image: a Debian root file system made
// from the same distribution packages the host runs, imported into Docker, so
// that the native, container and VM platforms run the same binaries at the
// same versions.
//
// The image is named after its inputs (suite, mirrors, packages, the host's
// versions of those packages and the build recipe), so a change to any of them
// yields a new tag and an unchanged configuration finds its image again
// without building. A user may instead name an image of their own (Config.Ref)
// that is already in the engine.
package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nearnative/nearnative/internal/benchbin"
)

// RecipeVersion is part of the inputs hash. Bump it whenever the build steps
// change in a way that changes the image, so that old images stop matching.
const RecipeVersion = 3

// Repository is the image name every built workload image is tagged with.
const Repository = "nearnative/workload"

// Labels set on every built image.
const (
	// LabelImage marks an image built by this package; its value is
	// LabelImageWorkload.
	LabelImage = "nearnative.image"
	// LabelImageWorkload is the value of LabelImage on workload images.
	LabelImageWorkload = "workload"
	// LabelInputs carries the full inputs hash of the image.
	LabelInputs = "nearnative.inputs"
)

// DefaultSuite is the Debian release the image is built from.
const DefaultSuite = "bookworm"

// DefaultPackages are the packages every built-in workload needs: servers,
// load generators and the tools used to look inside a running platform.
var DefaultPackages = []string{
	"redis-server", "redis-tools", "postgresql", "fio", "iperf3", "sockperf",
	"nginx", "haproxy", "nutcracker", "iproute2", "procps",
	// the application studies' tiers: DVD Store (Apache + mod_php + PostgreSQL),
	// CloudStone (nginx + PHP-FPM + MariaDB), the auction (Java on Tomcat,
	// RabbitMQ, PostgreSQL)
	"apache2", "libapache2-mod-php8.2", "php8.2-pgsql", "php8.2-fpm", "php8.2-mysql", "php8.2-gd",
	"mariadb-server", "openjdk-17-jre-headless", "tomcat10", "rabbitmq-server",
	// the runtime libraries of nearnative's own benchmark programs (package
	// benchbin): OpenMP for STREAM, OpenBLAS for LINPACK
	"libgomp1", "libopenblas0-pthread",
}

// Config says what goes into the workload image.
type Config struct {
	// Packages are installed (with their dependencies) on top of a minimal
	// Debian system.
	Packages []string
	// Suite is the Debian release, e.g. "bookworm".
	Suite string
	// Mirror is the Debian archive URL for Suite and Suite-updates.
	Mirror string
	// SecurityMirror is the Debian security archive URL for Suite-security;
	// empty leaves the security suite out (versions may then lag the host's).
	SecurityMirror string
	// Ref names an image the user supplies (pulled from their registry) to be
	// used instead of building one. When set, the other fields are ignored.
	Ref string
}

// DefaultConfig returns the default packages and suite, with the mirrors the
// host's apt sources use, so the image gets packages from where the host got
// its own.
func DefaultConfig() (Config, error) {
	c := Config{Packages: slices.Clone(DefaultPackages), Suite: DefaultSuite}
	m, err := HostMirrors(c.Suite)
	if err != nil {
		return c, err
	}
	c.Mirror, c.SecurityMirror = m.Mirror, m.Security
	return c, nil
}

var (
	packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	suiteName   = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// Validate reports a configuration that cannot be built.
func (c Config) Validate() error {
	if c.Ref != "" {
		if strings.ContainsAny(c.Ref, " \t\n") {
			return fmt.Errorf("image reference %q contains white space", c.Ref)
		}
		return nil
	}
	if len(c.Packages) == 0 {
		return errors.New("image: no packages to install")
	}
	for _, p := range c.Packages {
		if !packageName.MatchString(p) {
			return fmt.Errorf("image: %q is not a Debian package name", p)
		}
	}
	if !suiteName.MatchString(c.Suite) {
		return fmt.Errorf("image: %q is not a Debian suite name", c.Suite)
	}
	if err := checkMirror("mirror", c.Mirror); err != nil {
		return err
	}
	if c.SecurityMirror != "" {
		if err := checkMirror("security mirror", c.SecurityMirror); err != nil {
			return err
		}
	}
	return nil
}

func checkMirror(what, u string) error {
	if u == "" {
		return fmt.Errorf("image: no Debian %s (none found in the host's apt sources)", what)
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("image: %s %q is not an http(s) URL", what, u)
	}
	return nil
}

// packages returns the package list sorted and without duplicates.
func (c Config) packages() []string {
	p := slices.Clone(c.Packages)
	slices.Sort(p)
	return slices.Compact(p)
}

// Hash returns the hex SHA-256 of the image inputs: suite, mirrors, packages,
// the host's installed versions of those packages, nearnative's benchmark
// programs (their build IDs and the host's gcc, see benchbin.Manifest) and
// RecipeVersion. It asks dpkg-query for the host versions and gcc for its
// version.
func (c Config) Hash(ctx context.Context) (string, error) {
	host, err := HostVersions(ctx, c.packages())
	if err != nil {
		return "", err
	}
	programs, err := benchbin.Manifest(ctx)
	if err != nil {
		return "", err
	}
	return inputsHash(c, host, programs), nil
}

// Tag returns the image reference for the current inputs:
// nearnative/workload:<first 12 hex digits of Hash>, or Ref when set.
func (c Config) Tag(ctx context.Context) (string, error) {
	if c.Ref != "" {
		return c.Ref, nil
	}
	h, err := c.Hash(ctx)
	if err != nil {
		return "", err
	}
	return TagOf(h), nil
}

// TagOf returns the image reference for an inputs hash.
func TagOf(hash string) string {
	if len(hash) > 12 {
		hash = hash[:12]
	}
	return Repository + ":" + hash
}

// inputsHash hashes the build inputs given the host's package versions and
// the benchmark programs' manifest. Each input is one line so that no two
// different inputs serialise alike.
func inputsHash(c Config, host map[string]string, programs string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "recipe %d\n", RecipeVersion)
	fmt.Fprintf(&b, "suite %s\n", c.Suite)
	fmt.Fprintf(&b, "mirror %s\n", c.Mirror)
	fmt.Fprintf(&b, "security %s\n", c.SecurityMirror)
	for _, p := range c.packages() {
		fmt.Fprintf(&b, "package %s %s\n", p, host[p])
	}
	for _, l := range strings.Split(strings.TrimSpace(programs), "\n") {
		fmt.Fprintf(&b, "benchbin %s\n", l)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
