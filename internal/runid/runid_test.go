package runid

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewFormat(t *testing.T) {
	before := time.Now().UTC().Truncate(time.Second)
	id := New()
	after := time.Now().UTC()
	if !regexp.MustCompile(`^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$`).MatchString(string(id)) {
		t.Fatalf("New() = %q, want YYYYMMDD-HHMMSS-xxxx", id)
	}
	if len(id) != 20 {
		t.Errorf("len(%q) = %d, want 20", id, len(id))
	}
	at, err := time.Parse("20060102-150405", string(id)[:15])
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) || at.After(after) {
		t.Errorf("New() time %v not within [%v, %v] (UTC)", at, before, after)
	}
	if got, err := Parse(string(id)); err != nil || got != id {
		t.Errorf("Parse(New()) = %q, %v", got, err)
	}
	if id.String() != string(id) {
		t.Errorf("String() = %q", id.String())
	}
}

func TestNewUnique(t *testing.T) {
	// 16 random bits per second: among 200 IDs made in the same second about
	// 0.3 collisions are expected; more than 10 means the suffix is not random.
	seen := map[ID]bool{}
	for i := 0; i < 200; i++ {
		seen[New()] = true
	}
	if len(seen) < 190 {
		t.Errorf("only %d distinct IDs among 200", len(seen))
	}
}

func TestParse(t *testing.T) {
	good := []string{"20240131-235959-00ff", "19700101-000000-0000", "20261121-200940-c47d"}
	for _, s := range good {
		if id, err := Parse(s); err != nil || string(id) != s {
			t.Errorf("Parse(%q) = %q, %v", s, id, err)
		}
	}
	bad := []string{
		"", "last", "20240131-235959", "20240131-235959-00f", "20240131-235959-00fff",
		"20240131-235959-00FF", "20240131-235959-00fg", "2024013-235959-00ff", "20240131_235959_00ff",
		"nn-20240131-235959-00ff", " 20240131-235959-00ff", "20240131-235959-00ff\n", "20240131-235959-00ff/..",
	}
	for _, s := range bad {
		id, err := Parse(s)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want an error", s, id)
			continue
		}
		if id != "" {
			t.Errorf("Parse(%q) returned %q with its error", s, id)
		}
		if !strings.Contains(err.Error(), "not a run ID") {
			t.Errorf("Parse(%q) error %q", s, err)
		}
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		id   ID
		want string
	}{
		{"20240131-235959-00ff", "00ff"},
		{"abcd", "abcd"},
		{"abc", "abc"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := tt.id.Short(); got != tt.want {
			t.Errorf("%q.Short() = %q, want %q", tt.id, got, tt.want)
		}
	}
	if s := New().Short(); len(s) != 4 {
		t.Errorf("New().Short() = %q", s)
	}
}

func TestValid(t *testing.T) {
	for _, tt := range []struct {
		id   ID
		want bool
	}{
		{New(), true},
		{"20240131-235959-00ff", true},
		{"../../canary", false},
		{"20240131-235959-00ff/..", false},
		{"20240131-235959-00ff/../../x", false},
		{"", false},
		{"*", false},
	} {
		if got := tt.id.Valid(); got != tt.want {
			t.Errorf("%q.Valid() = %v, want %v", tt.id, got, tt.want)
		}
	}
}
