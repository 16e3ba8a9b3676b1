// Package benchbin compiles nearnative's own benchmark programs (the C
// sources of package csrc) and says where every platform finds them.
//
// The programs are compiled once, by `nearnative image build` with the
// host's gcc, into the workload image at Dir; the same files are then
// copied from the image to Dir on the host. The VM guests' disks are made
// from the image, so native, container and VM run the very same bytes.
// They are compiled for the x86-64 baseline (-march=x86-64: SSE2, no AVX)
// because the image may land on any x86-64 and a guest's virtual CPU may
// offer fewer instructions than the host; what needs wide vectors (LINPACK)
// gets them from OpenBLAS, which picks its kernels for the CPU it finds at
// run time.
//
// Every program prints "build: ID" first, ID being BuildID (a hash of the
// program's source, flags and this recipe), so a trial can tell that a
// platform runs the program this nearnative was built with.
package benchbin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nearnative/nearnative/csrc"
)

// Dir is where the programs live: on the host, in the workload image and
// in the VM guests alike.
const Dir = "/usr/local/libexec/nearnative"

// Recipe is part of every BuildID; bump it when the way the programs are
// built changes.
const Recipe = 1

// ArchFlags are given to every compile: the x86-64 baseline, so that the
// same binary runs on any x86-64 host and in any guest CPU model.
var ArchFlags = []string{"-march=x86-64", "-mtune=generic"}

// Program is one of the benchmark programs.
type Program struct {
	// Name is the file name in Dir.
	Name string
	// Source is the C file's path in csrc.FS.
	Source string
	// CFlags and Libs are passed to gcc before and after the source.
	CFlags, Libs []string
	// Packages are the Debian packages of the shared libraries it needs
	// beyond libc, on the host and in the image.
	Packages []string
}

// The programs.
var (
	// Stream is McCalpin's STREAM kernels with OpenMP threads.
	Stream = Program{Name: "nn-stream", Source: "stream/stream.c",
		CFlags: []string{"-O3", "-fopenmp"}, Libs: []string{"-lm"}, Packages: []string{"libgomp1"}}
	// Linpack solves HPL's problem with OpenBLAS's LAPACK (dgetrf, dgetrs),
	// linked to libopenblas.so.0 by name so that no other BLAS stands in.
	Linpack = Program{Name: "nn-linpack", Source: "linpack/linpack.c",
		CFlags: []string{"-O2"}, Libs: []string{"-l:libopenblas.so.0", "-lm"}, Packages: []string{"libopenblas0-pthread"}}
	// RR is the TCP request/response pinger, server and client.
	RR = Program{Name: "nn-rr", Source: "rr/rr.c", CFlags: []string{"-O2", "-pthread"}, Libs: []string{"-lm"}}
)

// Programs lists every program.
var Programs = []Program{Stream, Linpack, RR}

// Path is the program's path on every platform.
func (p Program) Path() string { return filepath.Join(Dir, p.Name) }

// source returns the program's C source.
func (p Program) source() ([]byte, error) {
	b, err := csrc.FS.ReadFile(p.Source)
	if err != nil {
		return nil, fmt.Errorf("benchbin: source of %s: %w", p.Name, err)
	}
	return b, nil
}

// BuildID is the first 16 hex digits of the SHA-256 of the recipe, the
// program's name, flags and source: what the program prints as "build:".
func (p Program) BuildID() string {
	src, err := p.source()
	if err != nil {
		panic(err) // embedded at compile time: cannot happen
	}
	h := sha256.New()
	fmt.Fprintf(h, "nearnative-benchbin recipe=%d\nname=%s\narch=%s\ncflags=%s\nlibs=%s\n",
		Recipe, p.Name, strings.Join(ArchFlags, " "), strings.Join(p.CFlags, " "), strings.Join(p.Libs, " "))
	h.Write(src)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// gccArgs is the gcc command line that compiles src into out.
func (p Program) gccArgs(src, out string) []string {
	args := []string{"gcc"}
	args = append(args, ArchFlags...)
	args = append(args, "-Wall")
	args = append(args, p.CFlags...)
	args = append(args, fmt.Sprintf(`-DNN_BUILD="%s"`, p.BuildID()), "-o", out, src)
	return append(args, p.Libs...)
}

// Compiler returns gcc's version line ("gcc (Debian 12.2.0-14) 12.2.0").
func Compiler(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "gcc", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("gcc is needed to build nearnative's benchmark programs (apt-get install gcc libc6-dev, or make setup): %w", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// Manifest describes the programs for the image's inputs hash: the
// compiler and every program's BuildID, one per line.
func Manifest(ctx context.Context) (string, error) {
	cc, err := Compiler(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "compiler %s\n", cc)
	for _, p := range Programs {
		fmt.Fprintf(&b, "program %s %s\n", p.Name, p.BuildID())
	}
	return b.String(), nil
}

// Build compiles every program into dir (created if needed), each written
// under a temporary name and renamed when complete.
func Build(ctx context.Context, dir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if _, err := Compiler(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("benchbin: %w", err)
	}
	work, err := os.MkdirTemp("", "nearnative-benchbin-")
	if err != nil {
		return fmt.Errorf("benchbin: %w", err)
	}
	defer os.RemoveAll(work)
	for _, p := range Programs {
		src, err := p.source()
		if err != nil {
			return err
		}
		srcPath := filepath.Join(work, filepath.Base(p.Source))
		if err := os.WriteFile(srcPath, src, 0o644); err != nil {
			return fmt.Errorf("benchbin: %w", err)
		}
		tmp := filepath.Join(dir, "."+p.Name+".tmp")
		args := p.gccArgs(srcPath, tmp)
		fmt.Fprintf(log, "  %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("compiling %s: %w: %s", p.Name, err, bytes.TrimSpace(out))
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return fmt.Errorf("benchbin: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, p.Name)); err != nil {
			return fmt.Errorf("benchbin: %w", err)
		}
	}
	return nil
}

// ErrMissing is matched by errors saying that a program is not installed,
// or not the one this nearnative was built with.
var ErrMissing = errors.New("benchmark program missing or out of date")

// CheckFile reports whether the file at path is p as this nearnative builds
// it: it must exist and carry p's BuildID.
func (p Program) CheckFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s not found: run `nearnative image build` (make setup does), which compiles it into the image and %s: %w", path, Dir, ErrMissing)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if !bytes.Contains(b, []byte(p.BuildID())) {
		return fmt.Errorf("%s was built from other sources than this nearnative's (build %s expected): run `nearnative image build`: %w", path, p.BuildID(), ErrMissing)
	}
	return nil
}

// CheckHost checks the program on the host (see CheckFile).
func (p Program) CheckHost() error { return p.CheckFile(p.Path()) }

// Output is what a program printed: its "key: value" lines.
type Output struct {
	values map[string][]string
}

// Parse reads a program's "key: value" lines; other lines are ignored.
func Parse(out []byte) Output {
	o := Output{values: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			continue
		}
		o.values[k] = append(o.values[k], strings.TrimSpace(v))
	}
	return o
}

// Get returns the first value of key, "" when absent.
func (o Output) Get(key string) string {
	if v := o.values[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// All returns every value of key in order.
func (o Output) All(key string) []string { return o.values[key] }

// Float returns the first field of key's value as a finite number.
func (o Output) Float(key string) (float64, error) {
	v := o.Get(key)
	if v == "" {
		return 0, fmt.Errorf("no %q line", key)
	}
	f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: %q is not a number", key, v)
	}
	return f, nil
}

// CheckBuild fails when the output's "build:" line is not p's BuildID: the
// platform ran another version of the program.
func (p Program) CheckBuild(o Output, where string) error {
	got := o.Get("build")
	if got == p.BuildID() {
		return nil
	}
	if got == "" {
		got = "none printed"
	}
	return fmt.Errorf("%s on %s is not the one this nearnative was built with (build %s, want %s): run `nearnative image build`: %w",
		p.Name, where, got, p.BuildID(), ErrMissing)
}
