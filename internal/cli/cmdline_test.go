package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The helpers here read `nearnative ...` command lines out of text (help
// examples, README.md, docs/) and check them against the command tree:
// the command exists and every flag it gives exists and takes its value.

// cmdLine is a command line found in a text, with where it was.
type cmdLine struct {
	where string // "README.md:12"
	text  string // from "nearnative" on
}

var (
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// inlineCode is a code span on one line.
	inlineCode = regexp.MustCompile("`([^`]+)`")
	// shellSplit separates the commands of a shell line.
	shellSplit = regexp.MustCompile(`\s+(\|\||\||&&)\s+|;\s+|\$\(|<\(`)
	// placeholder is a value the reader fills in: RUN, FILE, <id>, N.
	placeholder = regexp.MustCompile(`^([A-Z][A-Z0-9_.]*|<[^>]+>|\.\.\.)$`)
)

// commandLines returns the nearnative command lines of a markdown text (or
// a help example block): every line of a fenced or indented code block,
// and every inline code span, whose command, after a prompt, sudo or
// variable assignments, is nearnative.
func commandLines(name, text string) []cmdLine {
	var out []cmdLine
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		where := fmt.Sprintf("%s:%d", name, i+1)
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		var chunks []string
		if inFence {
			chunks = []string{line}
		} else {
			if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
				chunks = append(chunks, line) // an indented code block
			}
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				chunks = append(chunks, m[1])
			}
		}
		for _, c := range chunks {
			for _, seg := range shellSplit.Split(c, -1) {
				if cmd, ok := nearnativeCommand(seg); ok {
					out = append(out, cmdLine{where: where, text: cmd})
				}
			}
		}
	}
	return out
}

// nearnativeCommand returns seg from its nearnative on when that is the
// command seg runs.
func nearnativeCommand(seg string) (string, bool) {
	fields := strings.Fields(seg)
	for len(fields) > 0 {
		f := fields[0]
		switch {
		case f == "$" || f == "#" || f == "sudo" || f == "time" || f == "env" || f == "exec":
		case strings.Contains(f, "=") && !strings.HasPrefix(f, "-") && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(f):
		case f == "nearnative" || strings.HasSuffix(f, "/nearnative"):
			return strings.Join(append([]string{"nearnative"}, fields[1:]...), " "), true
		default:
			return "", false
		}
		fields = fields[1:]
	}
	return "", false
}

// shellWords splits a command line as a shell would for our purposes:
// quotes group words; a redirection and its target, a comment and a
// closing parenthesis end the words; [brackets] of an optional part are
// dropped.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	have := false
	var quote rune
	flush := func() {
		if have {
			words = append(words, cur.String())
		}
		cur.Reset()
		have = false
	}
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, have = r, true
		case r == ' ' || r == '\t':
			flush()
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	flush()
	var out []string
	for _, w := range words {
		if w == "#" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "&>") || w == ")" || w == "&" || w == "\\" {
			break
		}
		w = strings.TrimSuffix(strings.TrimPrefix(w, "["), "]")
		w = strings.TrimSuffix(w, ")")
		if w == "" || w == "..." {
			continue
		}
		out = append(out, w)
	}
	return out, nil
}

// checkCommandLine checks a "nearnative ..." line against a fresh command
// tree: the (sub)command exists and its flags exist and parse. Values
// written as placeholders (RUN, FILE, <n>) stand for any valid value.
func checkCommandLine(line string) error {
	words, err := shellWords(line)
	if err != nil {
		return err
	}
	if len(words) == 0 || words[0] != "nearnative" {
		return fmt.Errorf("not a nearnative command")
	}
	return checkWords(words)
}

// checkWords checks one command line's words; a word of alternatives
// ("up|down|status") is checked as each of them.
func checkWords(words []string) error {
	for i, w := range words {
		if !strings.Contains(w, "|") || strings.HasPrefix(w, "-") {
			continue
		}
		for _, alt := range strings.Split(w, "|") {
			v := append(append(append([]string(nil), words[:i]...), alt), words[i+1:]...)
			if err := checkWords(v); err != nil {
				return err
			}
		}
		return nil
	}
	a := &app{stdout: io.Discard, stderr: io.Discard, reg: Registry()}
	root := a.rootCmd()
	root.InitDefaultVersionFlag() // as Execute does
	cmd, rest, err := root.Find(words[1:])
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	if !cmd.Runnable() && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return fmt.Errorf("unknown command %q for %q", rest[0], cmd.CommandPath())
	}
	rest = fillPlaceholders(cmd, rest)
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// fillPlaceholders replaces a placeholder given as a flag's value by the
// flag's default, so that `--rounds N` parses.
func fillPlaceholders(cmd *cobra.Command, args []string) []string {
	out := append([]string(nil), args...)
	lookup := func(name string) *pflag.Flag {
		if strings.HasPrefix(name, "--") {
			return cmd.Flags().Lookup(name[2:])
		}
		if len(name) == 2 && name[0] == '-' {
			return cmd.Flags().ShorthandLookup(name[1:])
		}
		return nil
	}
	dummy := func(f *pflag.Flag) string {
		if f.DefValue != "" && f.DefValue != "[]" {
			return f.DefValue
		}
		return "x"
	}
	for i := 0; i < len(out); i++ {
		name, value, hasValue := strings.Cut(out[i], "=")
		f := lookup(name)
		if f == nil || f.NoOptDefVal != "" {
			continue
		}
		switch {
		case hasValue && placeholder.MatchString(value):
			out[i] = name + "=" + dummy(f)
		case !hasValue && i+1 < len(out) && placeholder.MatchString(out[i+1]):
			out[i+1] = dummy(f)
			i++
		}
	}
	return out
}
