package report

import (
	"reflect"
	"testing"
)

func TestGroupOf(t *testing.T) {
	tests := []struct {
		names  []string
		groups []string
		first  []string // members of the first group
	}{
		{[]string{"1-to-4", "1-to-16", "pairs-20", "grp-16x16"}, []string{"1-to", "pairs", "grp"}, []string{"1-to-4", "1-to-16"}},
		{[]string{"fio-randread", "fio-randwrite", "tcp-stream-send"}, []string{"fio", "tcp-stream"}, []string{"fio-randread", "fio-randwrite"}},
		{[]string{"linpack", "stream"}, []string{"linpack", "stream"}, []string{"linpack"}},
		{[]string{"-x", "a-"}, []string{"-x", "a"}, []string{"-x"}},
	}
	for _, tc := range tests {
		groups, members := groupOf(tc.names)
		if !reflect.DeepEqual(groups, tc.groups) {
			t.Errorf("groupOf(%v) groups = %v, want %v", tc.names, groups, tc.groups)
		}
		if !reflect.DeepEqual(members[groups[0]], tc.first) {
			t.Errorf("groupOf(%v) first group = %v, want %v", tc.names, members[groups[0]], tc.first)
		}
	}
}

// TestNum checks the number formats of the tables: a zero must show as 0,
// not as an empty cell.
func TestNum(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.5, "0.5"}, {0.01234, "0.01234"}, {2.5, "2.500"}, {123.45, "123.5"}, {12345.6, "12346"}, {-0.25, "-0.25"}} {
		if got := num(tt.v); got != tt.want {
			t.Errorf("num(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
