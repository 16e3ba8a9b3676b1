// Package iptables reads iptables' own rule listings (iptables -S,
// iptables-save) back into the arguments that make or delete the rule.
package iptables

import (
	"fmt"
	"strings"
)

// Split splits a rule as iptables -S or iptables-save prints it into
// arguments, honouring the double quotes (and the backslash escapes inside
// them) iptables puts around a comment with spaces: `-A X --comment "a b"`
// is -A, X, --comment, a b. Unbalanced quotes are an error.
func Split(rule string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(rule); i++ {
		ch := rule[i]
		switch {
		case ch == '\\' && inQuote && i+1 < len(rule):
			i++
			cur.WriteByte(rule[i])
		case ch == '"':
			inQuote, have = !inQuote, true
		case (ch == ' ' || ch == '\t') && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unbalanced quotes in iptables rule %q", rule)
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}
