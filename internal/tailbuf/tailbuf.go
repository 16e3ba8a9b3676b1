// Package tailbuf keeps the last bytes written to it: the end of a child
// process's stderr, for the error message when the process fails.
package tailbuf

import (
	"strings"
	"sync"
)

// Buffer keeps the last Max bytes written to it; it is safe for
// concurrent use.
type Buffer struct {
	Max int

	mu sync.Mutex
	b  []byte
}

// Write keeps the tail of what has been written, p included; it never
// fails.
func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = t.b[len(t.b)-t.Max:]
	}
	return len(p), nil
}

// String returns what is kept, white space trimmed, or "(no output on
// stderr)" when nothing is.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(no output on stderr)"
	}
	return s
}
