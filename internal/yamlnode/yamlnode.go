// Package yamlnode holds what nearnative's YAML files (study files, hosts
// files) share when they are decoded node by node so that every error
// names its file and line: the line of a yaml.v3 syntax error, the walk
// over a mapping's keys that refuses unknown and duplicate ones, and the
// words for a node in "want X, got Y" messages. Each file's own decoder
// keeps its keys, types and error type.
package yamlnode

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Errorf makes an error at line of the file being decoded.
type Errorf func(line int, format string, args ...any) error

// parserProblems are the messages of yaml.v3's parser errors, as opposed to
// its scanner errors; their line numbers need correcting.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlLine matches the position yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// Syntax returns the line (from 1) and the one-line message of a yaml.v3
// decoding error, its "yaml: line N: " prefix taken off.
func Syntax(err error) (line int, msg string) {
	msg = strings.ReplaceAll(err.Error(), "\n", " ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
		msg = msg[len(m[0]):]
	}
	// yaml.v3 counts lines from 0 in parser (not scanner) errors, and
	// leaves the line out when it is 0.
	if parserProblems[msg] || line == 0 {
		line++
	}
	return line, msg
}

// Fields calls set for each key of mapping n in order, aliases of values
// resolved. known lists the keys allowed (nil allows any); where names the
// mapping in errors; with skipNull, keys whose value is null (left out)
// are skipped when known is given. A key that is not a plain name, unknown
// or given twice is an error at its line, made with errf.
func Fields(n *yaml.Node, where string, known []string, skipNull bool, errf Errorf, set func(key string, k, v *yaml.Node) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return errf(k.Line, "%s: a key must be a plain name, got %s", where, KindName(k))
		}
		if known != nil && !slices.Contains(known, k.Value) {
			return errf(k.Line, "unknown key %q in %s (known: %s)", k.Value, where, strings.Join(known, ", "))
		}
		if first, dup := seen[k.Value]; dup {
			return errf(k.Line, "duplicate key %q in %s (first at line %d)", k.Value, where, first)
		}
		seen[k.Value] = k.Line
		if skipNull && known != nil && IsNull(v) {
			continue
		}
		if err := set(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// Deref follows an alias to the node it names.
func Deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is absent or null.
func IsNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// KindName describes a node for "want X, got Y" errors.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}
