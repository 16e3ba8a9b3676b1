package vmprobe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unpack makes the tree scripts/vm-kernel.sh leaves for version v under
// root; without modules.dep when deps is false.
func unpack(t *testing.T, root, v string, deps bool) {
	t.Helper()
	d := filepath.Join(KernelDir(root), v)
	mods := filepath.Join(d, "lib", "modules", v)
	for _, dir := range []string{filepath.Join(d, "boot"), mods} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "boot", "vmlinuz-"+v), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if deps {
		if err := os.WriteFile(filepath.Join(mods, "modules.dep"), []byte("x.ko:\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindKernel(t *testing.T) {
	a, b, empty := t.TempDir(), t.TempDir(), t.TempDir()
	unpack(t, a, "6.1.0-9-cloud-amd64", true)
	unpack(t, a, "6.1.0-27-cloud-amd64", true)
	unpack(t, a, "6.1.0-30-cloud-amd64", false) // half unpacked: no modules.dep
	unpack(t, b, "6.1.0-40-cloud-amd64", true)

	tests := []struct {
		roots []string
		want  string // version, "" = error
	}{
		{[]string{a}, "6.1.0-27-cloud-amd64"}, // numeric, not string, order; the incomplete one skipped
		{[]string{empty, a}, "6.1.0-27-cloud-amd64"},
		{[]string{a, b}, "6.1.0-27-cloud-amd64"}, // the first root with a kernel wins
		{[]string{b, a}, "6.1.0-40-cloud-amd64"},
		{[]string{empty}, ""},
	}
	for _, tc := range tests {
		k, err := FindKernel(tc.roots...)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "vm-kernel.sh") || !strings.Contains(err.Error(), KernelDir(empty)) {
				t.Errorf("%v: err = %v, want one naming the directory and vm-kernel.sh", tc.roots, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.roots, err)
			continue
		}
		if k.Version != tc.want {
			t.Errorf("%v: version %s, want %s", tc.roots, k.Version, tc.want)
		}
		if !strings.HasPrefix(k.Image, tc.roots[0]) && !strings.HasPrefix(k.Image, tc.roots[1]) {
			t.Errorf("image %s outside the roots", k.Image)
		}
		if filepath.Base(k.Image) != "vmlinuz-"+k.Version || filepath.Base(k.Modules) != k.Version {
			t.Errorf("kernel %+v: image and modules do not match the version", k)
		}
	}
}

func TestVersionLess(t *testing.T) {
	tests := []struct {
		a, b string
		less bool
	}{
		{"6.1.0-9-cloud-amd64", "6.1.0-27-cloud-amd64", true},
		{"6.1.0-27-cloud-amd64", "6.1.0-9-cloud-amd64", false},
		{"6.1.0-27-cloud-amd64", "6.10.0-1-cloud-amd64", true},
		{"6.1.0-27-cloud-amd64", "6.1.0-27-cloud-amd64", false},
	}
	for _, tc := range tests {
		if got := versionLess(tc.a, tc.b); got != tc.less {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestKernelRoots(t *testing.T) {
	t.Setenv("NEARNATIVE_HOME", "/x/home")
	if r := KernelRoots(); len(r) != 2 || r[0] != "/x/home" || r[1] != "/var/lib/nearnative" {
		t.Errorf("KernelRoots = %v", r)
	}
	t.Setenv("NEARNATIVE_HOME", "")
	if r := KernelRoots(); len(r) != 1 || r[0] != "/var/lib/nearnative" {
		t.Errorf("KernelRoots = %v", r)
	}
}
