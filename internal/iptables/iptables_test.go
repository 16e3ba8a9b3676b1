package iptables

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string // nil: an error
	}{
		{`A -j ACCEPT`, []string{"A", "-j", "ACCEPT"}},
		{"A\t-j  ACCEPT", []string{"A", "-j", "ACCEPT"}},
		{`A --comment "two words" -j X`, []string{"A", "--comment", "two words", "-j", "X"}},
		{`A --comment "say \"hi\""`, []string{"A", "--comment", `say "hi"`}},
		{`A --comment ""`, []string{"A", "--comment", ""}},
		{`-A FORWARD -i nn-k8s0 -m comment --comment "kubernetes forwarding rules" -j ACCEPT`,
			[]string{"-A", "FORWARD", "-i", "nn-k8s0", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "ACCEPT"}},
		{`-A X --comment "open`, nil},
	}
	for _, tt := range tests {
		got, err := Split(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("Split(%q) = %q: want an error (unbalanced quote)", tt.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
