package scaleout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nearnative/nearnative/internal/datacache"
	"github.com/nearnative/nearnative/internal/driver/respc"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/redisproto"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
)

// LoaderVersion changes whenever the way the data is loaded or laid out
// changes; with the key space, the shard count, the value size and the
// versions of redis-server and nutcracker it keys the cache.
const LoaderVersion = 1

// CacheRoot is where the loaded key spaces are kept (internal/datacache,
// whose rules they follow), like the workload image's build cache: delete
// it to reclaim the space.
func CacheRoot() string { return datacache.New(state.Home(), Name).Dir }

// Cache is a loaded key space: the baseline's AOF directory (every key) and
// each shard's (the keys twemproxy sends to it), as Redis left them after a
// clean shutdown with the AOF on: a base file in RDB format, an empty
// increment and the manifest.
type Cache struct {
	Dir  string
	Meta Meta
}

// Meta describes a cache; it is stored as meta.json beside the data.
type Meta struct {
	Key       string `json:"key"`
	Keyspace  int64  `json:"keyspace"`
	Shards    int    `json:"shards"`
	ValueSize int    `json:"value_size"`
	// BaseKeys and ShardKeys are the keys each server held after loading
	// (DBSIZE).
	BaseKeys     int64   `json:"base_keys"`
	ShardKeys    []int64 `json:"shard_keys"`
	RedisVersion string  `json:"redis_version"`
	ProxyVersion string  `json:"proxy_version"`
	Loader       int     `json:"loader_version"`
	// Load is the time to write every key (the baseline directly, the
	// shards through twemproxy, at once); AOF the time to turn the AOF on
	// (a rewrite into the RDB-format base file) on every server; Total the
	// whole build, starting and stopping the servers included.
	Load  time.Duration `json:"load_ns"`
	AOF   time.Duration `json:"aof_ns"`
	Total time.Duration `json:"total_ns"`
	Bytes int64         `json:"bytes"`
	Built time.Time     `json:"built"`
}

// BaseDir is the baseline's data directory (holding appendonlydir).
func (c *Cache) BaseDir() string { return filepath.Join(c.Dir, "base") }

// ShardDir is shard i's data directory.
func (c *Cache) ShardDir(i int) string { return filepath.Join(c.Dir, "shard-"+strconv.Itoa(i)) }

// versions asks the host's redis-server and nutcracker for theirs (the
// workload image has the same ones: setup builds it from the host's package
// versions).
func versions(ctx context.Context) (redis, proxy string, err error) {
	out, err := exec.CommandContext(ctx, "redis-server", "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("asking redis-server for its version (install redis-server: make setup): %w", err)
	}
	redis = strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "nutcracker", "--version")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("asking nutcracker for its version (install nutcracker: make setup): %w", err)
	}
	proxy = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	return redis, proxy, nil
}

// CacheKey names the cache of settings s for the given server versions.
func CacheKey(s Settings, redisVersion, proxyVersion string) string {
	h := sha256.New()
	fmt.Fprintf(h, "redis-scaleout data\nkeyspace %d\nshards %d\nvalue %d\nkeys %s%%0%dd\nloader %d\nredis %s\nproxy %s\n",
		s.Keyspace, s.Redis, s.ValueSize, respc.KeyPrefix, respc.KeyDigits, LoaderVersion, redisVersion, proxyVersion)
	fmt.Fprintf(h, "twemproxy: distribution ketama, hash fnv1a_64, servers named %s..%s, weight 1\n", ShardName(0), ShardName(s.Redis-1))
	return fmt.Sprintf("k%d-n%d-v%d-%s", s.Keyspace, s.Redis, s.ValueSize, hex.EncodeToString(h.Sum(nil))[:12])
}

// Loader loads key spaces into the cache, on the host's native platform.
type Loader struct {
	// Host is the native platform the loading servers run on.
	Host interface {
		platform.Platform
		deploy.Backend
	}
	// Run labels the servers.
	Run runid.ID
	// Root is the cache root (CacheRoot() by default).
	Root string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (l Loader) logf(format string, args ...any) {
	if l.Log != nil {
		fmt.Fprintf(l.Log, format+"\n", args...)
	}
}

// ensureMu serialises the builds of one process; lockFile those of
// several.
var ensureMu sync.Mutex

// Ensure returns the cache of settings s, loading it first when there is
// none. A build left half-made by a crashed run is removed by the next.
func (l Loader) Ensure(ctx context.Context, s Settings) (*Cache, error) {
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if l.Root == "" {
		l.Root = CacheRoot()
	}
	rv, pv, err := versions(ctx)
	if err != nil {
		return nil, err
	}
	key := CacheKey(s, rv, pv)
	c := &Cache{}
	c.Dir, _, err = datacache.Cache{Dir: l.Root}.Ensure(ctx, key, &c.Meta, func(ctx context.Context, dir string) (any, error) {
		l.logf("%s: loading %d keys into the baseline's Redis and through twemproxy into %d shards (once; cached in %s)", Name, s.Keyspace, s.Redis, l.Root)
		meta, err := l.build(ctx, dir, s)
		if err != nil {
			return nil, err
		}
		meta.Key, meta.RedisVersion, meta.ProxyVersion = key, rv, pv
		l.logf("%s: cache %s: %d keys; baseline %d, shards %v; load %v, AOF on %v, whole build %v, %s on disk", Name, key, s.Keyspace,
			meta.BaseKeys, meta.ShardKeys, meta.Load.Round(time.Millisecond), meta.AOF.Round(time.Millisecond), meta.Total.Round(time.Millisecond), gib(meta.Bytes))
		return meta, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: loading the key space: %w", Name, err)
	}
	return c, nil
}

// build loads the key space in dir: the topology runs natively with empty
// data directories and the AOF off; every key goes to the baseline's Redis
// directly and through twemproxy to the shards; then each server turns its
// AOF on (a rewrite writes the RDB-format base file) and shuts down.
func (l Loader) build(ctx context.Context, dir string, s Settings) (Meta, error) {
	start := time.Now()
	m := Meta{Keyspace: s.Keyspace, Shards: s.Redis, ValueSize: s.ValueSize, Loader: LoaderVersion, Built: start.UTC()}
	// The loading servers run as redis, which may not enter the cache
	// root (a NEARNATIVE_HOME of mode 0700, as mktemp makes): they load
	// into a temp dir of the run's, and the AOF directories they leave are
	// copied into the cache.
	work, err := state.TempDir(l.Run, "load")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		return m, err
	}
	d := Data{Base: filepath.Join(work, "base")}
	final := Data{Base: filepath.Join(dir, "base")}
	for i := 0; i < s.Redis; i++ {
		d.Shards = append(d.Shards, filepath.Join(work, "shard-"+strconv.Itoa(i)))
		final.Shards = append(final.Shards, filepath.Join(dir, "shard-"+strconv.Itoa(i)))
	}
	for _, p := range append([]string{d.Base}, d.Shards...) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return m, err
		}
	}
	ls := s
	ls.Pin, ls.DriverCPUs, ls.LBOnHost = "", "", false
	dep, err := deploy.Deploy(ctx, l.Host, "load", ls.Topology(d, ""), deploy.Options{Host: l.Host})
	if err != nil {
		return m, err
	}
	defer dep.Stop(context.WithoutCancel(ctx))
	base := dep.Entries(RoleBase, PortRedis)[0]
	proxy := dep.Entries(RoleProxy, PortProxy)[0]
	var shards []string
	for _, r := range dep.Role(RoleRedis) {
		shards = append(shards, r.Srv.Addr(PortRedis))
	}
	t0 := time.Now()
	errs := make(chan error, 2)
	go func() { errs <- loadKeys(ctx, base, s.Keyspace, s.ValueSize) }()
	go func() { errs <- loadKeys(ctx, proxy, s.Keyspace, s.ValueSize) }()
	if err := errors.Join(<-errs, <-errs); err != nil {
		return m, err
	}
	m.Load = time.Since(t0)
	if err := countKeys(ctx, s, base, shards, &m); err != nil {
		return m, err
	}
	t1 := time.Now()
	if err := allAOFOn(ctx, append([]string{base}, shards...)); err != nil {
		return m, err
	}
	m.AOF = time.Since(t1)
	if err := dep.Stop(ctx); err != nil {
		return m, fmt.Errorf("stopping the loading servers: %w", err)
	}
	to := append([]string{final.Base}, final.Shards...)
	for i, p := range append([]string{d.Base}, d.Shards...) {
		if _, err := os.Stat(filepath.Join(p, AOFDirName, "appendonly.aof.manifest")); err != nil {
			return m, fmt.Errorf("no AOF manifest after the loading servers stopped: %w", err)
		}
		if _, err := datacache.CopyTree(filepath.Join(p, AOFDirName), filepath.Join(to[i], AOFDirName), datacache.CopyOptions{UID: -1, RootMode: 0o755, DirMode: 0o755, FileMode: 0o644}); err != nil {
			return m, fmt.Errorf("%s: putting the loaded AOF directory in the cache: %w", Name, err)
		}
		n, _, _ := datacache.Size(filepath.Join(to[i], AOFDirName))
		m.Bytes += n
	}
	m.Total = time.Since(start)
	return m, nil
}

// countKeys checks that the baseline holds every key and the shards
// together hold every key, each some, and records the counts in m.
func countKeys(ctx context.Context, s Settings, base string, shards []string, m *Meta) (err error) {
	if m.BaseKeys, err = dbsize(ctx, base); err != nil {
		return err
	}
	if m.BaseKeys != s.Keyspace {
		return fmt.Errorf("the baseline's Redis holds %d keys after loading %d", m.BaseKeys, s.Keyspace)
	}
	var sum int64
	for i, a := range shards {
		n, err := dbsize(ctx, a)
		if err != nil {
			return err
		}
		m.ShardKeys = append(m.ShardKeys, n)
		sum += n
		if n == 0 {
			return fmt.Errorf("twemproxy sent no key to shard %s of %d keys", ShardName(i), s.Keyspace)
		}
	}
	if sum != s.Keyspace {
		return fmt.Errorf("the shards hold %d keys after loading %d through twemproxy", sum, s.Keyspace)
	}
	return nil
}

// allAOFOn turns the AOF on at every address at once.
func allAOFOn(ctx context.Context, addrs []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(addrs))
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = aofOn(ctx, a)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadWriters and loadBatch shape the loader's traffic: a few connections
// writing pipelines of SETs.
const (
	loadWriters = 4
	loadBatch   = 2000
)

// loadKeys sets every key of the key space at addr, over loadWriters
// connections each writing pipelines of loadBatch SETs.
func loadKeys(ctx context.Context, addr string, keyspace int64, valueSize int) error {
	value := []byte(strings.Repeat("x", valueSize))
	errs := make([]error, loadWriters)
	var wg sync.WaitGroup
	for w := 0; w < loadWriters; w++ {
		lo, hi := keyspace*int64(w)/loadWriters, keyspace*int64(w+1)/loadWriters
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := redisproto.Dial(ctx, addr)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			var buf, key []byte
			for i := lo; i < hi; i += loadBatch {
				n := min(loadBatch, hi-i)
				buf = buf[:0]
				for j := int64(0); j < n; j++ {
					key = respc.AppendKey(key[:0], uint64(i+j))
					buf = redisproto.AppendArrayHeader(buf, 3)
					buf = redisproto.AppendBulk(buf, "SET")
					buf = redisproto.AppendBulkBytes(buf, key)
					buf = redisproto.AppendBulkBytes(buf, value)
				}
				if err := c.Pipeline(ctx, buf, int(n)); err != nil {
					errs[w] = fmt.Errorf("loading keys through %s: %w", addr, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func dbsize(ctx context.Context, addr string) (int64, error) {
	c, err := redisproto.Dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Int(ctx, "DBSIZE")
}

// aofOn turns the AOF on at addr and waits for the rewrite that writes its
// base file.
func aofOn(ctx context.Context, addr string) error {
	c, err := redisproto.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Do(ctx, "CONFIG", "SET", "appendonly", "yes"); err != nil {
		return fmt.Errorf("turning the AOF on at %s: %w", addr, err)
	}
	for {
		info, err := c.Info(ctx, "persistence")
		if err != nil {
			return err
		}
		if info["aof_enabled"] == "1" && info["aof_rewrite_in_progress"] == "0" && info["aof_rewrite_scheduled"] == "0" {
			if st := info["aof_last_bgrewrite_status"]; st != "ok" {
				return fmt.Errorf("the AOF rewrite at %s ended %s", addr, st)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Copy gives one trial its own copy of the cache: for the baseline's Redis
// and each shard a directory labelled with the run (removed by cleanup if
// the run dies) holding a copy of its AOF directory. The base files, which
// Redis only reads (a rewrite writes a new one), are hard links into the
// cache when the file system allows; the manifest and the increment, which
// Redis appends to, are copied. remove deletes the copies.
func (c *Cache) Copy(run runid.ID, trial string) (_ Data, remove func() error, err error) {
	d := Data{AOF: true}
	var made []string
	remove = func() error {
		var errs []error
		for _, p := range made {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	one := func(src, purpose string) (string, error) {
		dst, err := state.TempDir(run, trial+"-"+purpose)
		if err != nil {
			return "", err
		}
		made = append(made, dst)
		if err := os.Chmod(dst, 0o755); err != nil {
			return "", err
		}
		return dst, copyAOF(filepath.Join(src, AOFDirName), filepath.Join(dst, AOFDirName))
	}
	if d.Base, err = one(c.BaseDir(), "base"); err != nil {
		return d, nil, err
	}
	for i := 0; i < c.Meta.Shards; i++ {
		p, err := one(c.ShardDir(i), ShardName(i))
		if err != nil {
			return d, nil, err
		}
		d.Shards = append(d.Shards, p)
	}
	return d, remove, nil
}

// copyAOF copies an AOF directory, hard-linking its base files.
func copyAOF(src, dst string) error {
	_, err := datacache.CopyTree(src, dst, datacache.CopyOptions{UID: -1, RootMode: 0o755, FileMode: 0o644,
		Link: func(rel string) bool { return strings.Contains(rel, ".base.") }})
	if err != nil {
		return fmt.Errorf("%s: the cached AOF directory: %w", Name, err)
	}
	return nil
}

// diskAvailable is the free space of the file system holding dir (or its
// nearest existing parent), 0 when unknown.
func diskAvailable(dir string) int64 {
	for p := dir; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			return int64(st.Bavail) * int64(st.Bsize)
		}
		if p == filepath.Dir(p) {
			return 0
		}
	}
}
