package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nearnative/nearnative/internal/runid"
)

func TestPaths(t *testing.T) {
	t.Setenv(EnvHome, "")
	if got := Home().Root; got != DefaultHome {
		t.Errorf("Home() without %s = %q", EnvHome, got)
	}
	t.Setenv(EnvHome, "/x/y")
	d := Home()
	if d.Root != "/x/y" {
		t.Errorf("Home() = %q", d.Root)
	}
	id := runid.ID("20240131-235959-00ff")
	for got, want := range map[string]string{
		d.DB():       "/x/y/results.db",
		d.RunDir(id): "/x/y/runs/20240131-235959-00ff",
		d.ImageDir(): "/x/y/images",
		d.LockDir():  DefaultLockDir, // machine-wide, not under the home
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestLock(t *testing.T) {
	t.Setenv(EnvLockDir, t.TempDir()) // not the machine-wide lock directory
	d := Dir{Root: t.TempDir()}
	id := runid.New()
	if d.Alive(id) {
		t.Fatal("Alive before any lock")
	}
	l, err := d.AcquireLock(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	b, err := os.ReadFile(filepath.Join(d.LockDir(), string(id)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"pid":`+strconv.Itoa(os.Getpid())+",") {
		t.Errorf("lock file holds %q, want our PID %d", b, os.Getpid())
	}
	for _, p := range []string{d.LockDir(), filepath.Join(d.LockDir(), string(id))} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := os.FileMode(0o600); st.IsDir() {
			if st.Mode().Perm() != 0o700 {
				t.Errorf("%s has mode %v, want 0700", p, st.Mode().Perm())
			}
		} else if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}

	// flock locks belong to the open file, so a second open in this same
	// process conflicts as another process's would.
	if !d.Alive(id) {
		t.Error("Alive = false while the lock is held")
	}
	if !d.Alive(id) {
		t.Error("Alive = false on a second look: the first look must not take the lock")
	}
	l2, err := d.AcquireLock(id)
	if err == nil {
		l2.Release()
		t.Fatal("second AcquireLock of a held run succeeded")
	}
	if !strings.Contains(err.Error(), "already running") || !strings.Contains(err.Error(), string(id)) {
		t.Errorf("second AcquireLock error %q does not say the run is already running", err)
	}
	if !d.Alive(id) {
		t.Error("a failed AcquireLock dropped the holder's lock")
	}

	other := runid.New()
	for other == id {
		other = runid.New()
	}
	if d.Alive(other) {
		t.Error("another run is Alive")
	}

	if err := l.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if d.Alive(id) {
		t.Error("Alive = true after Release")
	}
	if _, err := os.Stat(filepath.Join(d.LockDir(), string(id))); !os.IsNotExist(err) {
		t.Errorf("lock file still there after Release: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	var nilLock *Lock
	if err := nilLock.Release(); err != nil {
		t.Errorf("nil Release: %v", err)
	}

	// The run can be taken again (--resume).
	l3, err := d.AcquireLock(id)
	if err != nil {
		t.Fatalf("AcquireLock after Release: %v", err)
	}
	if !d.Alive(id) {
		t.Error("not Alive after re-acquiring")
	}
	l3.Release()
}

func TestAliveStaleLockFile(t *testing.T) {
	t.Setenv(EnvLockDir, t.TempDir()) // not the machine-wide lock directory
	// A crashed run leaves its lock file without a lock on it.
	d := Dir{Root: t.TempDir()}
	id := runid.New()
	if err := os.MkdirAll(d.LockDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.LockDir(), string(id)), []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d.Alive(id) {
		t.Error("Alive on an unlocked lock file")
	}
	l, err := d.AcquireLock(id)
	if err != nil {
		t.Fatalf("AcquireLock over a stale lock file: %v", err)
	}
	l.Release()
}

func TestAcquireLockUnwritable(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLockDir, filepath.Join(f, "locks")) // under a file: cannot be created
	d := Dir{Root: t.TempDir()}
	if l, err := d.AcquireLock(runid.New()); err == nil {
		l.Release()
		t.Fatal("AcquireLock under a file succeeded")
	}
}

func TestTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	id := runid.New()
	for _, purpose := range []string{"redis", "r01-redis-native", ""} {
		dir, err := TempDir(id, purpose)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != tmp {
			t.Errorf("TempDir = %q, not under $TMPDIR %q", dir, tmp)
		}
		prefix := runid.Prefix + string(id) + "-" + purpose + "-"
		if !strings.HasPrefix(filepath.Base(dir), prefix) {
			t.Errorf("TempDir(%q) = %q, want a name starting %q", purpose, dir, prefix)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("TempDir did not create a directory: %v", err)
		}
		got, ok := RunOfTempDir(dir)
		if !ok || got != id {
			t.Errorf("RunOfTempDir(%q) = %q, %v; want %q", dir, got, ok, id)
		}
	}
	if _, err := TempDir(id, "a/b"); err == nil {
		t.Error("TempDir with a '/' in the purpose succeeded")
	}
}

func TestRunOfTempDir(t *testing.T) {
	tests := []struct {
		path string
		want runid.ID
		ok   bool
	}{
		{"/tmp/nn-20240131-235959-00ff-redis-123", "20240131-235959-00ff", true},
		{"nn-20240131-235959-00ff--9", "20240131-235959-00ff", true},
		{"/tmp/nn-20240131-235959-00ff", "20240131-235959-00ff", true},
		{"/tmp/nn-short", "", false},
		{"/tmp/nn-", "", false},
		{"/tmp/nn-2024013x-235959-00ff-redis-1", "", false},
		{"/tmp/other-20240131-235959-00ff-redis", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := RunOfTempDir(tt.path)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RunOfTempDir(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTempDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	a, b := runid.New(), runid.New()
	for a == b {
		b = runid.New()
	}
	mk := func(id runid.ID, purpose string) string {
		d, err := TempDir(id, purpose)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a1, a2, b1 := mk(a, "redis"), mk(a, "pg"), mk(b, "redis")
	if err := os.Mkdir(filepath.Join(tmp, "unrelated"), 0o755); err != nil {
		t.Fatal(err)
	}

	check := func(id runid.ID, want ...string) {
		t.Helper()
		got, err := TempDirs(id)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("TempDirs(%q) =\n%v\nwant\n%v", id, got, want)
		}
	}
	check(a, a1, a2)
	check(b, b1)
	check("", a1, a2, b1)
	check("19990101-000000-0000") // no such run
}

// TestLiveness: only positive evidence makes a run dead; a run whose lock is
// in another lock directory is not taken for a crashed one.
func TestLiveness(t *testing.T) {
	locks := t.TempDir()
	t.Setenv(EnvLockDir, locks)
	d := Dir{Root: t.TempDir()}
	writeOwnerRecord := func(id runid.ID, o Owner) {
		t.Helper()
		if err := os.MkdirAll(d.RunDir(id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.RunDir(id), ownerFile), o.encode(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A process that has exited: its PID names nothing (or a later process
	// with another start time).
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	me := currentOwner()
	if me.Boot == "" || me.Start == 0 {
		t.Fatalf("current owner %+v: no boot ID or start time", me)
	}
	held := runid.New()
	l, err := d.AcquireLock(held)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	crashed := runid.New()
	if err := os.WriteFile(filepath.Join(locks, string(crashed)), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherLockDir, rebooted, exitedOwner, unknown := runid.New(), runid.New(), runid.New(), runid.New()
	writeOwnerRecord(otherLockDir, me)
	writeOwnerRecord(rebooted, Owner{PID: me.PID, Start: me.Start, Boot: "another-boot"})
	writeOwnerRecord(exitedOwner, Owner{PID: exited.Process.Pid, Start: 1, Boot: me.Boot})
	for _, tt := range []struct {
		name string
		id   runid.ID
		want Liveness
	}{
		{"lock held", held, Alive},
		{"lock file left unlocked", crashed, Dead},
		{"live owner, lock in another lock directory", otherLockDir, Alive},
		{"owner from another boot", rebooted, Dead},
		{"owner process gone", exitedOwner, Dead},
		{"no record (another lock directory, or a test's resources)", unknown, Unknown},
		{"not a run ID", "../../canary", Unknown},
	} {
		if got := d.Liveness(tt.id); got != tt.want {
			t.Errorf("%s: Liveness = %v, want %v", tt.name, got, tt.want)
		}
	}
	// The owner record goes with an orderly end.
	if _, err := os.Stat(filepath.Join(d.RunDir(held), ownerFile)); err != nil {
		t.Errorf("no owner record while the run holds its lock: %v", err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(d.RunDir(held), ownerFile)); !os.IsNotExist(err) {
		t.Errorf("owner record still there after Release: %v", err)
	}
	if d.Liveness(held) != Unknown {
		t.Errorf("a run that ended in order reads %v", d.Liveness(held))
	}
	// A sweep claims a crashed run: it then reads alive to other sweeps,
	// and Unlock keeps the file for the next one when the sweep failed.
	c, err := d.Claim(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if d.Liveness(crashed) != Alive {
		t.Error("a claimed run does not read alive")
	}
	if _, err := d.Claim(crashed); err == nil {
		t.Error("a second claim succeeded")
	}
	c.Unlock()
	if d.Liveness(crashed) != Dead {
		t.Errorf("after Unlock: %v, want dead", d.Liveness(crashed))
	}
	if _, err := os.Stat(filepath.Join(d.RunDir(crashed), ownerFile)); !os.IsNotExist(err) {
		t.Error("a claim wrote an owner record")
	}
	if _, err := d.AcquireLock("../../canary"); err == nil || !strings.Contains(err.Error(), "not a run ID") {
		t.Errorf("AcquireLock of a bad ID: %v", err)
	}
	if _, err := TempDirs("../x"); err == nil {
		t.Error("TempDirs of a bad ID succeeded")
	}
}
