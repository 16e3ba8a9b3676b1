package tailbuf

import "testing"

func TestBuffer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"nothing written", 8, nil, "(no output on stderr)"},
		{"only white space", 8, []string{" \n"}, "(no output on stderr)"},
		{"within the bound", 16, []string{"abc\n", "def\n"}, "abc\ndef"},
		{"the tail of one long write", 4, []string{"abcdefgh"}, "efgh"},
		{"the tail across writes", 5, []string{"abc", "def", "gh"}, "defgh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Buffer{Max: tc.max}
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := b.String(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
