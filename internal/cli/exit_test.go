package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nearnative/nearnative/internal/engine"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
)

// TestExitCode: the exit code follows the error's type wherever it is
// wrapped, never its words.
func TestExitCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("run 20261121-100000-aaaa: %w", err) }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, ExitOK},
		{"explicit code", &ExitError{Code: ExitBadInput, Err: errors.New("x")}, ExitBadInput},
		{"interrupted run", wrap(engine.ErrInterrupted), ExitInterrupted},
		{"cancelled", wrap(context.Canceled), ExitInterrupted},
		{"study file", wrap(&study.Error{File: "s.yaml", Line: 3, Err: errors.New("rounds: 1 is below the minimum 2")}), ExitBadInput},
		{"no such run", wrap(fmt.Errorf("looking up: %w", store.ErrNoRun)), ExitBadInput},
		{"ambiguous run", store.ErrAmbiguous, ExitBadInput},
		{"bad study for the engine", wrap(engine.ErrConfig), ExitBadInput},
		{"platform unavailable", wrap(platform.Unavailablef("no KVM")), ExitUnavailable},
		{"machine busy with --no-wait", wrap(&state.BusyError{}), ExitUnavailable},
		{"result store failed", wrap(&engine.StoreError{Err: errors.New("disk full")}), ExitUnavailable},
		{"full disk", fmt.Errorf("writing --html r.html: %w", syscall.ENOSPC), ExitFailure},
		// Words that once decided the code decide nothing now.
		{"words of a usage error", errors.New("invalid argument: unknown flag: requires accepts"), ExitFailure},
		{"system error", wrap(os.ErrPermission), ExitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestCommandExitCodes runs commands that fail at different places and
// checks the code each gets.
func TestCommandExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvHome, dir)
	t.Setenv(state.EnvLockDir, filepath.Join(dir, "locks"))
	db := filepath.Join(dir, "results.db")
	seedRuns(t, db, 1)
	badStudy := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badStudy, []byte("name: bad\nrounds: 3\nplatforms: [native]\nworkloads:\n  - workload: redis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hosts files: a role placed on a host that does not exist, and an
	// unknown key; both refused before anything connects or is stored.
	hosts := "hosts:\n  - name: sut1\n    address: 192.0.2.1\n    user: root\n    agent: true\n    roles: [sut]\n" +
		"  - name: client1\n    address: 192.0.2.2\n    user: root\n    agent: true\n    roles: [driver]\n"
	badPlace := filepath.Join(dir, "place.yaml")
	if err := os.WriteFile(badPlace, []byte(hosts+"place: {redis: sut9}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "key.yaml")
	if err := os.WriteFile(badKey, []byte(strings.Replace(hosts, "    roles: [sut]", "    role: [sut]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want int
		msg  string // in the error
	}{
		{"role placed on a missing host", []string{"run", "redis", "--hosts", badPlace}, ExitBadInput, `place.yaml:12: place: redis on "sut9": no such host (hosts: sut1, client1)`},
		{"hosts file with an unknown key", []string{"doctor", "--hosts", badKey}, ExitBadInput, `key.yaml:6: unknown key "role" in hosts[0]`},
		{"cleanup with a bad hosts file", []string{"cleanup", "--hosts", badKey}, ExitBadInput, `key.yaml:6: unknown key "role"`},
		{"unknown command", []string{"rn", "redis"}, ExitBadInput, `unknown command "rn"`},
		{"unknown flag", []string{"runs", "--fast"}, ExitBadInput, "unknown flag"},
		{"too many arguments", []string{"show", "a", "b"}, ExitBadInput, "accepts 1 arg"},
		{"missing argument", []string{"show"}, ExitBadInput, "accepts 1 arg"},
		{"flag of the wrong type", []string{"run", "redis", "--rounds", "many"}, ExitBadInput, "invalid argument"},
		{"unknown run", []string{"show", "nope"}, ExitBadInput, "no run matches"},
		{"study below min_pairs", []string{"run", badStudy}, ExitBadInput, "bad.yaml:2: min_pairs: 5 is above rounds (3)"},
		{"rounds below min_pairs", []string{"run", "redis", "--rounds", "3"}, ExitBadInput, "--rounds 3: below the study's min_pairs (5)"},
		{"unknown study", []string{"run", "nosuch"}, ExitBadInput, "no built-in study or file named nosuch"},
		// A report whose destination is a device that is always full: the
		// path is fine, the write fails: an I/O error, not bad input.
		{"full disk", []string{"report", "last", "--html", "/dev/full"}, ExitFailure, "no space left on device"},
		{"unwritable path", []string{"report", "last", "--html", filepath.Join(dir, "no", "dir", "r.html")}, ExitBadInput, "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), append([]string{"--db", db}, tt.args...), &stdout, &stderr)
			if got := ExitCode(err); got != tt.want || err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("exit %d (%v), want %d with %q", got, err, tt.want, tt.msg)
			}
		})
	}
}
