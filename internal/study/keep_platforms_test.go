package study

import (
	"slices"
	"testing"
)

// TestKeepPlatforms: the platforms a run skips leave the study and its
// quick block alike, so that the YAML the study writes parses back.
func TestKeepPlatforms(t *testing.T) {
	reg := testRegistry()
	src := `name: k
baseline: native
platforms: [native, {name: b, base: native}, {name: c, base: native}]
workloads:
  - {workload: sleep}
quick: {rounds: 5, platforms: [native, c]}
`
	tests := []struct {
		name      string
		keep      []string
		wantPlats []string
		wantQuick []string
	}{
		{"all kept", []string{"native", "b", "c"}, []string{"native", "b", "c"}, []string{"native", "c"}},
		{"one outside quick dropped", []string{"native", "c"}, []string{"native", "c"}, []string{"native", "c"}},
		{"one in quick dropped", []string{"native", "b"}, []string{"native", "b"}, []string{"native"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(src), "k.yaml", reg)
			if err != nil {
				t.Fatal(err)
			}
			s.KeepPlatforms(func(name string) bool { return slices.Contains(tc.keep, name) })
			if got := s.PlatformNames(); !slices.Equal(got, tc.wantPlats) {
				t.Errorf("platforms %v, want %v", got, tc.wantPlats)
			}
			if !slices.Equal(s.Quick.Platforms, tc.wantQuick) {
				t.Errorf("quick.platforms %v, want %v", s.Quick.Platforms, tc.wantQuick)
			}
			b, err := s.YAML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(b, "back.yaml", reg)
			if err != nil {
				t.Fatalf("the kept study does not parse back: %v\n%s", err, b)
			}
			if got := back.PlatformNames(); !slices.Equal(got, tc.wantPlats) || !slices.Equal(back.Quick.Platforms, tc.wantQuick) {
				t.Errorf("parsed back: platforms %v quick %v, want %v and %v", got, back.Quick.Platforms, tc.wantPlats, tc.wantQuick)
			}
		})
	}
}
