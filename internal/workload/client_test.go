package workload

import (
	"reflect"
	"testing"
)

func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"whole lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across writes", []string{"Star", "ting test\nTe", "st end\n"}, []string{"Starting test", "Test end"}},
		{"last line unterminated", []string{"x\ny"}, []string{"x", "y"}},
		{"empty lines kept", []string{"\n\n"}, []string{"", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			w := &lineWriter{fn: func(s string) { got = append(got, s) }}
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			w.flush()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lines %q, want %q", got, tc.want)
			}
		})
	}
}
