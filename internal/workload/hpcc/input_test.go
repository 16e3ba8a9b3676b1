package hpcc

import (
	"bytes"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	in := Input{N: 45000}
	got := in.Render(2, 3)
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != 36 {
		t.Fatalf("%d lines, want 36 (HPL.dat's 31, the separator, 4 PTRANS lines)", len(lines))
	}
	// hpcc reads the first field of numbered lines (1-based).
	want := map[int]string{5: "1", 6: "45000", 7: "1", 8: "80", 10: "1", 11: "2", 12: "3", 13: "16", 33: "0", 35: "0"}
	for n, v := range want {
		if f := strings.Fields(lines[n-1]); len(f) == 0 || f[0] != v {
			t.Errorf("line %d = %q, want first field %s", n, lines[n-1], v)
		}
	}
	if !strings.HasPrefix(lines[31], "#####") {
		t.Errorf("line 32 = %q, want the separator", lines[31])
	}
	// The template is the same file with the grid left open.
	tmpl := Input{N: 45000}.Template()
	filled := bytes.Replace(bytes.Replace(tmpl, []byte("@P@"), []byte("2"), 1), []byte("@Q@"), []byte("3"), 1)
	if fields(filled) != fields(got) {
		t.Errorf("template filled in:\n%s\nwant:\n%s", filled, got)
	}
	if l := strings.Split(string(Input{N: 100, NB: 10, Threshold: 1e-9}.Render(1, 1)), "\n")[12]; !strings.HasPrefix(l, "1e-09 ") {
		t.Errorf("threshold line %q", l)
	}
}

// fields returns the whitespace-separated fields of each line.
func fields(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(out, "\n")
}

func TestInputValidate(t *testing.T) {
	tests := []struct {
		in Input
		ok bool
	}{
		{Input{N: 1000}, true},
		{Input{N: 80, NB: 80}, true},
		{Input{N: 0}, false},
		{Input{N: 50, NB: 80}, false},
		{Input{N: 1000, NB: -1}, false},
		{Input{N: 1000, Threshold: -1}, false},
		{Input{N: 1 << 32}, false},
	}
	for _, tc := range tests {
		if err := tc.in.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func TestGrid(t *testing.T) {
	tests := []struct{ np, p, q int }{
		{1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 2, 2}, {6, 2, 3}, {7, 1, 7}, {12, 3, 4}, {16, 4, 4}, {64, 8, 8}, {96, 8, 12},
	}
	for _, tc := range tests {
		if p, q := Grid(tc.np); p != tc.p || q != tc.q {
			t.Errorf("Grid(%d) = %dx%d, want %dx%d", tc.np, p, q, tc.p, tc.q)
		}
	}
}

func TestNFromMemory(t *testing.T) {
	tests := []struct {
		bytes int64
		nb    int
		want  int
	}{
		// The seed's 45K: a multiple of NB just under.
		{45000 * 45000 * 8, 80, 44960},
		{8 * 1000 * 1000, 80, 960},
		{8 * 1000 * 1000, 100, 1000},
		{100, 80, 80}, // never below one block
	}
	for _, tc := range tests {
		n := NFromMemory(tc.bytes, tc.nb)
		if n != tc.want {
			t.Errorf("NFromMemory(%d, %d) = %d, want %d", tc.bytes, tc.nb, n, tc.want)
		}
		if n > tc.nb && int64(n)*int64(n)*8 > tc.bytes {
			t.Errorf("N=%d needs %d bytes, more than %d", n, int64(n)*int64(n)*8, tc.bytes)
		}
	}
}

func TestNForArrays(t *testing.T) {
	for _, bytes := range []int64{1, 1 << 20, 32 << 20, 4 * 32 << 20, 16 << 30} {
		n := NForArrays(bytes, DefaultNB)
		if n%DefaultNB != 0 {
			t.Errorf("NForArrays(%d) = %d, not a multiple of %d", bytes, n, DefaultNB)
		}
		for _, np := range []int{1, 2, 3, 7, 64, 256} {
			if bytes/int64(np) > 8<<30 {
				continue // over hpcc's cap of 2^30 elements per process
			}
			total := int64(np) * StreamVectorSize(n, np) * 8
			if total < bytes {
				t.Errorf("bytes %d, np %d: N=%d gives arrays of %d bytes", bytes, np, n, total)
			}
		}
		if smaller := n - DefaultNB; smaller > 0 && int64(smaller)*int64(smaller)*8/3 >= bytes {
			t.Errorf("NForArrays(%d) = %d, but %d would do", bytes, n, smaller)
		}
	}
}

func TestStreamVectorSize(t *testing.T) {
	tests := []struct {
		n, np int
		want  int64
	}{
		{1200, 2, 240000},    // captured: "Array size = 240000"
		{2000, 2, 666666},    // hpcc's summary STREAM_VectorSize=666666
		{1000, 1, 333333},    // one process
		{200000, 1, 1 << 30}, // capped to a C int's power of two
	}
	for _, tc := range tests {
		if v := StreamVectorSize(tc.n, tc.np); v != tc.want {
			t.Errorf("StreamVectorSize(%d, %d) = %d, want %d", tc.n, tc.np, v, tc.want)
		}
	}
}
