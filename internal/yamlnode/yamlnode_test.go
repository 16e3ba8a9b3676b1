package yamlnode

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestSyntax: the line of a syntax error is the one it is on, counted from
// 1, whether yaml.v3's scanner (from 1) or its parser (from 0) found it.
func TestSyntax(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		msg        string
	}{
		{"parser: unclosed list", "a: 1\nb: [x\n", 2, "did not find expected ',' or ']'"},
		{"no line given", "a: \x01\n", 1, "control characters are not allowed"},
		{"scanner: tab", "a: 1\n\tb: c\n", 2, "found a tab character that violates indentation"},
		{"scanner: no colon", "a:\n- x\nb\n", 3, "could not find expected ':'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tc.text), &n)
			if err == nil {
				t.Fatal("no syntax error")
			}
			line, msg := Syntax(err)
			if line != tc.line || msg != tc.msg {
				t.Fatalf("line %d %q, want line %d %q (from %q)", line, msg, tc.line, tc.msg, err)
			}
		})
	}
}

// TestFields: keys in order, aliases resolved, unknown, duplicate and
// non-scalar keys refused at their line, null values skipped only when
// asked and only where the keys are known.
func TestFields(t *testing.T) {
	errf := func(line int, format string, args ...any) error {
		return fmt.Errorf("%d: %s", line, fmt.Sprintf(format, args...))
	}
	for _, tc := range []struct {
		name, text string
		known      []string
		skipNull   bool
		want       string // the keys set saw with their values, or the error
	}{
		{"in order", "b: 1\na: 2\n", []string{"a", "b"}, false, "b=1 a=2"},
		{"alias resolved", "a: &x 1\nb: *x\n", []string{"a", "b"}, false, "a=1 b=1"},
		{"unknown key", "a: 1\nc: 2\n", []string{"a", "b"}, false, `2: unknown key "c" in m (known: a, b)`},
		{"any key", "a: 1\nc: 2\n", nil, false, "a=1 c=2"},
		{"duplicate key", "a: 1\na: 2\n", nil, false, `2: duplicate key "a" in m (first at line 1)`},
		{"key not a name", "[a]: 1\n", nil, false, "1: m: a key must be a plain name, got a list"},
		{"null kept", "a:\nb: 1\n", []string{"a", "b"}, false, "a= b=1"},
		{"null skipped", "a:\nb: 1\n", []string{"a", "b"}, true, "b=1"},
		{"null kept where any key goes", "a:\nb: 1\n", nil, true, "a= b=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tc.text), &doc); err != nil {
				t.Fatal(err)
			}
			var seen []string
			err := Fields(doc.Content[0], "m", tc.known, tc.skipNull, errf, func(key string, k, v *yaml.Node) error {
				seen = append(seen, key+"="+v.Value)
				return nil
			})
			got := strings.Join(seen, " ")
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKindName(t *testing.T) {
	for text, want := range map[string]string{"{a: 1}": "a mapping", "[1]": "a list", "x": `"x"`} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		if got := KindName(doc.Content[0]); got != want {
			t.Errorf("%s: got %s, want %s", text, got, want)
		}
	}
}
