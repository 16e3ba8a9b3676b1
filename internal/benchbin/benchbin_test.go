package benchbin

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBuildID(t *testing.T) {
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	seen := map[string]string{}
	for _, p := range Programs {
		id := p.BuildID()
		if !hex16.MatchString(id) {
			t.Errorf("%s: BuildID %q is not 16 hex digits", p.Name, id)
		}
		if id != p.BuildID() {
			t.Errorf("%s: BuildID not stable", p.Name)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share BuildID %s", p.Name, other, id)
		}
		seen[id] = p.Name
	}
	// Anything that changes the binary changes the ID.
	changes := map[string]func(*Program){
		"flags": func(p *Program) { p.CFlags = append(p.CFlags, "-funroll-loops") },
		"libs":  func(p *Program) { p.Libs = []string{"-lm"} },
		"name":  func(p *Program) { p.Name = "nn-other" },
	}
	for what, change := range changes {
		p := Linpack
		p.CFlags, p.Libs = append([]string{}, p.CFlags...), append([]string{}, p.Libs...)
		change(&p)
		if p.BuildID() == Linpack.BuildID() {
			t.Errorf("changing the %s kept the BuildID", what)
		}
	}
}

func TestGccArgs(t *testing.T) {
	got := strings.Join(Stream.gccArgs("/w/stream.c", "/o/nn-stream"), " ")
	want := `gcc -march=x86-64 -mtune=generic -Wall -O3 -fopenmp -DNN_BUILD="` + Stream.BuildID() + `" -o /o/nn-stream /w/stream.c -lm`
	if got != want {
		t.Errorf("gcc args\n  %s\nwant\n  %s", got, want)
	}
	if p := Linpack.Path(); p != "/usr/local/libexec/nearnative/nn-linpack" {
		t.Errorf("Path = %s", p)
	}
}

func TestParse(t *testing.T) {
	out := []byte("build: abc\nlibrary: /a/libopenblas.so\nnot a pair\nlibrary: /b/liblapack.so\ngflops: 92.5\n" +
		"copy-seconds: best 0.008 avg 0.009 max 0.012\nbad: NaN\nweird key: 1\n")
	o := Parse(out)
	if o.Get("build") != "abc" || o.Get("missing") != "" {
		t.Errorf("Get: %q %q", o.Get("build"), o.Get("missing"))
	}
	if l := o.All("library"); len(l) != 2 || l[1] != "/b/liblapack.so" {
		t.Errorf("All(library) = %q", l)
	}
	if o.Get("weird key") != "" {
		t.Error("a key with a space was taken")
	}
	tests := []struct {
		key  string
		want float64
		ok   bool
	}{
		{"gflops", 92.5, true}, {"copy-seconds", 0, false}, {"bad", 0, false}, {"missing", 0, false},
	}
	for _, tc := range tests {
		v, err := o.Float(tc.key)
		if (err == nil) != tc.ok || (tc.ok && v != tc.want) {
			t.Errorf("Float(%s) = %v, %v", tc.key, v, err)
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	stale := filepath.Join(dir, "stale")
	os.WriteFile(good, []byte("\x7fELF...build id "+RR.BuildID()+"..."), 0o755)
	os.WriteFile(stale, []byte("\x7fELF...build id 0000000000000000..."), 0o755)
	if err := RR.CheckFile(good); err != nil {
		t.Errorf("good file: %v", err)
	}
	for _, path := range []string{stale, filepath.Join(dir, "missing")} {
		err := RR.CheckFile(path)
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "nearnative image build") {
			t.Errorf("%s: %v, want ErrMissing with the fix", path, err)
		}
	}
	if err := RR.CheckBuild(Parse([]byte("build: "+RR.BuildID()+"\n")), "native"); err != nil {
		t.Errorf("CheckBuild: %v", err)
	}
	for _, out := range []string{"build: ffff\n", "no build line\n"} {
		if err := RR.CheckBuild(Parse([]byte(out)), "docker-nat"); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "docker-nat") {
			t.Errorf("%q: %v", out, err)
		}
	}
}

// TestBuildAndRun compiles the programs with the host's gcc and runs each
// briefly: the real binaries, their checks and their refusals.
func TestBuildAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles with gcc and runs the programs")
	}
	dir := t.TempDir()
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Build(ctx, dir, &log); err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	for _, p := range Programs {
		if err := p.CheckFile(filepath.Join(dir, p.Name)); err != nil {
			t.Errorf("built %s: %v", p.Name, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	run := func(name string, args ...string) (Output, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return Parse(stdout.Bytes()), stderr.String(), code
	}

	// STREAM: 4 Mi elements (32 MiB per array), 0.3 s of repetitions.
	o, stderr, code := run(Stream.Name, "-n", "4194304", "-T", "0.3")
	if code != 0 || o.Get("check") != "PASSED" || Stream.CheckBuild(o, "here") != nil {
		t.Errorf("nn-stream: exit %d, check %q, build %q: %s", code, o.Get("check"), o.Get("build"), stderr)
	}
	for _, k := range []string{"copy-mbps", "scale-mbps", "add-mbps", "triad-mbps"} {
		if v, err := o.Float(k); err != nil || v < 100 || v > 1e7 {
			t.Errorf("nn-stream %s = %v, %v", k, v, err)
		}
	}
	if reps, _ := o.Float("repetitions"); reps < 10 {
		t.Errorf("nn-stream ran %v repetitions, want at least 10", reps)
	}

	// LINPACK: a small solve passes HPL's check and names its BLAS.
	o, stderr, code = run(Linpack.Name, "-n", "600", "-g", "300")
	if code != 0 || o.Get("check") != "PASSED" || Linpack.CheckBuild(o, "here") != nil {
		t.Errorf("nn-linpack: exit %d, check %q, build %q: %s", code, o.Get("check"), o.Get("build"), stderr)
	}
	if r, err := o.Float("residual"); err != nil || !(r > 0 && r < 16) {
		t.Errorf("nn-linpack residual %v, %v", r, err)
	}
	if libs := strings.Join(o.All("library"), " "); !strings.Contains(libs, "openblas") {
		t.Errorf("nn-linpack loaded no OpenBLAS: %q", libs)
	}
	if !strings.HasPrefix(o.Get("openblas-config"), "OpenBLAS") {
		t.Errorf("openblas-config %q", o.Get("openblas-config"))
	}
	// A threshold no solve meets fails the check.
	if o, _, code := run(Linpack.Name, "-n", "300", "-e", "1e-12"); code != 1 || o.Get("check") != "FAILED" {
		t.Errorf("impossible threshold: exit %d, check %q", code, o.Get("check"))
	}
	// Oversubscription and bad arguments are refused.
	for _, p := range []Program{Stream, Linpack} {
		if _, stderr, code := run(p.Name, "-n", "5000", "-t", "4096"); code != 2 || !strings.Contains(stderr, "oversubscribe") {
			t.Errorf("%s -t 4096: exit %d, %q", p.Name, code, stderr)
		}
		if _, _, code := run(p.Name, "-n", "x"); code != 2 {
			t.Errorf("%s -n x: exit %d", p.Name, code)
		}
	}

	// RR: a server and 0.3 s of 1-byte round trips.
	ln := freePort(t)
	srv := exec.Command(filepath.Join(dir, RR.Name), "server", "-i", "127.0.0.1", "-p", ln)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var (
		out  Output
		errs string
	)
	for i := 0; i < 50; i++ {
		if out, errs, code = run(RR.Name, "client", "-i", "127.0.0.1", "-p", ln, "-t", "0.3", "-w", "0.1"); code == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 0 || RR.CheckBuild(out, "here") != nil || out.Get("msgsize") != "1" {
		t.Fatalf("nn-rr client: exit %d, %q: %s", code, out.Get("build"), errs)
	}
	tx, _ := out.Float("transactions")
	mean, _ := out.Float("rtt-mean-us")
	p50, _ := out.Float("rtt-p50-us")
	p99, _ := out.Float("rtt-p99-us")
	if tx < 10 || !(mean > 0) || !(p50 > 0 && p50 <= p99) {
		t.Errorf("nn-rr: %v transactions, mean %v, p50 %v, p99 %v", tx, mean, p50, p99)
	}
	// Without a server the client fails.
	srv.Process.Kill()
	srv.Wait()
	if _, stderr, code := run(RR.Name, "client", "-i", "127.0.0.1", "-p", ln, "-t", "0.1"); code != 1 || !strings.Contains(stderr, "connecting") {
		t.Errorf("no server: exit %d, %q", code, stderr)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
