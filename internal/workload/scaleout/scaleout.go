// Package scaleout is the redis-scaleout workload, after the seed "Scaling
// Out Redis Performance with Docker on vSphere 6.0": N Redis servers (AOF,
// appendfsync everysec) on the platform, K twemproxies that shard the key
// space over them by consistent hashing (ketama over fnv1a_64 of the key,
// the servers named so that the key -> shard map does not depend on
// addresses) and one HAProxy that spreads connections over the twemproxies
// round robin. The load balancers run beside the driver on every platform,
// as the seed ran them on a host of their own, so that only the Redis
// servers' platform differs between rows.
//
// Every trial measures the seed's two experiments one after the other on
// one deployment: the baseline (one Redis holding the whole key space,
// driven directly by one driver process) and the scale-out system (D driver
// processes x C connections through HAProxy). Both use nearnative's own
// RESP driver (behaviour redis-mix): pipelines of P commands, 75% GET / 25%
// SET, 1-byte values, keys uniform over the key space. The key space is
// loaded once into a cache (per key space, shard count and server
// versions) and every Redis of every trial starts from a copy of its
// shard's AOF directory, so that GETs hit.
package scaleout

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/driver/respc"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/sysinfo"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Name is the workload's name.
const Name = "redis-scaleout"

// The seed's values.
const (
	SeedRedis     = 8
	SeedDrivers   = 8
	SeedClients   = 100
	SeedPipeline  = 30
	SeedKeyspace  = 250_000_000
	SeedGetRatio  = 0.75
	SeedValueSize = 1
)

// Sizes: where the counts come from when their parameter is 0.
const (
	SizesMachine = "machine"
	SizesSeed    = "seed"
)

// Guest layouts of the vm platforms.
const (
	GuestsPerRedis = "per-redis" // the seed: one 2-vCPU guest per Redis
	GuestsOne      = "one"       // one guest holds every Redis
)

// BytesPerKey is the memory one key of the key space takes in a Redis 7.0
// (used_memory per key: a 16-byte key, a 1-byte value, the dictionary
// entry and its share of the hash table), measured here at 104 bytes with 2
// million keys and rounded up for the table's power-of-two growth and the
// allocator's overhead. Larger values add their size.
const BytesPerKey = 120

// RDBBytesPerKey is the size of one key in an RDB file (20 bytes measured).
const RDBBytesPerKey = 24

// guestOverhead is what a guest's own system needs besides the Redis data.
const guestOverhead = 256 << 20

// Workload is the redis-scaleout workload kind.
type Workload struct{}

// Name implements workload.Workload.
func (Workload) Name() string { return Name }

// Description implements workload.Workload.
func (Workload) Description() string {
	return "N Redis (AOF everysec) on the platform behind twemproxy and HAProxy beside the driver; nearnative's RESP driver, 75% GET / 25% SET pipelined: baseline (one Redis, one driver process), scale-out and their speedup"
}

// Params implements workload.Workload.
func (Workload) Params() []workload.Param {
	return []workload.Param{
		{Name: "sizes", Type: workload.String, Default: SizesMachine, Enum: []string{SizesMachine, SizesSeed},
			Help: "where the counts left at 0 come from: machine (scaled to this machine, stated in every trial's notes) or seed (the seed's 8 Redis, 8 drivers, 250 M keys)"},
		{Name: "redis", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "Redis servers N (0: sizes; machine: one per CPU, at most the seed's 8)"},
		{Name: "twemproxies", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "twemproxy servers K behind HAProxy (0: one per 4 Redis; the seed does not give its count)"},
		{Name: "drivers", Type: workload.Int, Default: "0", Min: 0, HasMin: true,
			Help: "driver processes D of the scale-out experiment (0: sizes; machine: one per Redis as the seed, seed: 8); the baseline uses one"},
		{Name: "clients", Type: workload.Int, Default: strconv.Itoa(SeedClients), Min: 1, HasMin: true,
			Help: "connections C per driver process (seed: 100)"},
		{Name: "pipeline", Type: workload.Int, Default: strconv.Itoa(SeedPipeline), Min: 1, HasMin: true,
			Help: "commands per pipeline P (seed: 30); the driver's operation is one pipeline"},
		{Name: "get_ratio", Type: workload.Float, Default: "0.75", Min: 0, HasMin: true,
			Help: "share of GETs among the commands, the rest SETs (seed: 0.75)"},
		{Name: "keyspace", Type: workload.Int, Default: "0", Quick: "200000", Min: 0, HasMin: true,
			Help: fmt.Sprintf("keys, all loaded before the first trial, drawn uniformly (0: sizes; machine: a quarter of memory at %d bytes a key, at most the seed's 250 M; quick: 200000)", BytesPerKey)},
		{Name: "keyspace_max", Type: workload.Int, Default: strconv.Itoa(SeedKeyspace), Min: 1, HasMin: true,
			Help: "the largest key space the machine rule picks (a study whose guests are small caps it here; an explicit keyspace is not capped)"},
		{Name: "value_size", Type: workload.Int, Default: strconv.Itoa(SeedValueSize), Min: 1, HasMin: true,
			Help: "bytes of each value (seed: 1)"},
		{Name: "guests", Type: workload.String, Default: GuestsPerRedis, Enum: []string{GuestsPerRedis, GuestsOne},
			Help: "vm platforms: per-redis (one guest of the platform's vcpus and vm_memory per Redis, as the seed's 2-vCPU VMs) or one (a guest for all)"},
		{Name: "lb_on_host", Type: workload.Bool, Default: "true",
			Help: "run twemproxy and HAProxy beside the driver on every platform (as the seed, on a host of their own); false: on the platform with the Redis"},
		{Name: "pin", Type: workload.String, Default: "none", Enum: []string{"none", topology.PinSpread},
			Help: "spread: every platform pins each Redis to a core of its own (a platform variant's option pin: spread does it for that platform alone); refused when N exceeds the cores left after driver_cpus"},
		{Name: "driver_threads", Type: workload.Int, Default: "1", Min: 0, HasMin: true,
			Help: "threads running Go code in each driver process (GOMAXPROCS; 0: one per CPU); 1, as the seed's single-threaded redis-benchmark, spared the scheduler hand-offs that cost our driver CPU (BENCH.md)"},
		{Name: "driver_cpus", Type: workload.String, Default: "",
			Help: "CPU list the driver processes are pinned to (taskset); pin: spread skips these cores"},
		{Name: "overcommit", Type: workload.Float, Default: strconv.FormatFloat(topology.DefaultOvercommit, 'g', -1, 64), Min: 0.1, HasMin: true,
			Help: "vm platforms: the largest guests x vCPUs / host CPUs allowed"},
		{Name: "warmup", Type: workload.Duration, Default: "2s", Quick: "500ms",
			Help: "load before each experiment's measured interval (the study's trial length), not counted"},
	}
}

// Settings are the workload's parameters with the sizes resolved.
type Settings struct {
	Sizes              string
	Redis, Twemproxies int
	Drivers, Clients   int
	Pipeline           int
	GetRatio           float64
	Keyspace           int64
	ValueSize          int
	Guests             string
	LBOnHost           bool
	Pin                string
	DriverCPUs         string
	DriverThreads      int
	Overcommit         float64
	Warmup             time.Duration
	scaled             []string // what the machine's sizes changed from the seed
	keyspaceMax        int64
}

// Machine is what sizing needs to know about the host.
type Machine struct {
	CPUs      int
	MemTotal  int64 // bytes
	MemAvail  int64 // bytes available now (MemAvailable)
	DiskAvail int64 // bytes free where the data cache is kept; 0: unknown
}

// ThisMachine reads the host's CPUs and memory.
func ThisMachine() Machine {
	m := Machine{CPUs: len(deploy.HostCPUs())}
	m.MemTotal, _ = sysinfo.MemoryBytes()
	m.MemAvail = memAvailable()
	m.DiskAvail = diskAvailable(CacheRoot())
	return m
}

// memAvailable is /proc/meminfo's MemAvailable in bytes, 0 when unknown.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// Resolve reads the parameters and fills in the sizes for machine m.
func Resolve(v workload.Values, m Machine) Settings {
	s := Settings{
		Sizes: v.String("sizes"), Redis: v.Int("redis"), Twemproxies: v.Int("twemproxies"),
		Drivers: v.Int("drivers"), Clients: v.Int("clients"), Pipeline: v.Int("pipeline"),
		GetRatio: v.Float("get_ratio"), Keyspace: int64(v.Int("keyspace")), ValueSize: v.Int("value_size"),
		keyspaceMax: int64(v.Int("keyspace_max")),
		Guests:      v.String("guests"), LBOnHost: v.Bool("lb_on_host"), Pin: v.String("pin"),
		DriverCPUs: v.String("driver_cpus"), DriverThreads: v.Int("driver_threads"), Overcommit: v.Float("overcommit"), Warmup: v.Duration("warmup"),
	}
	if s.Pin == "none" {
		s.Pin = topology.PinNone
	}
	seed := s.Sizes == SizesSeed
	if s.Redis == 0 {
		s.Redis = SeedRedis
		if !seed {
			s.Redis = max(1, min(SeedRedis, m.CPUs))
			if s.Redis != SeedRedis {
				s.scaled = append(s.scaled, fmt.Sprintf("%d Redis (one per CPU; the seed: %d)", s.Redis, SeedRedis))
			}
		}
	}
	if s.Twemproxies == 0 {
		s.Twemproxies = max(1, (s.Redis+3)/4)
	}
	if s.Drivers == 0 {
		s.Drivers = SeedDrivers
		if !seed {
			s.Drivers = s.Redis
			if s.Drivers != SeedDrivers {
				s.scaled = append(s.scaled, fmt.Sprintf("%d driver processes (one per Redis; the seed: %d)", s.Drivers, SeedDrivers))
			}
		}
	}
	if s.Keyspace == 0 {
		s.Keyspace = SeedKeyspace
		if !seed {
			perKey := int64(BytesPerKey + s.ValueSize)
			quarter := m.MemTotal / 4 / perKey
			s.Keyspace = max(1, min(SeedKeyspace, quarter, s.keyspaceMax))
			switch {
			case s.Keyspace == SeedKeyspace:
			case s.Keyspace == s.keyspaceMax && s.keyspaceMax < quarter:
				s.scaled = append(s.scaled, fmt.Sprintf("%d keys (keyspace_max; a quarter of the %s of memory would hold %d at %d bytes a key; the seed: 250 M)",
					s.Keyspace, gib(m.MemTotal), quarter, perKey))
			default:
				s.scaled = append(s.scaled, fmt.Sprintf("%d keys (a quarter of the %s of memory at %d bytes a key; the seed: 250 M)",
					s.Keyspace, gib(m.MemTotal), perKey))
			}
		}
	}
	return s
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// KeyBytes is the memory one copy of the key space takes in Redis.
func (s Settings) KeyBytes() int64 { return s.Keyspace * int64(BytesPerKey+s.ValueSize) }

// HostMemoryNeed is the memory the host needs for the data: the baseline's
// copy of the key space and the shards' copy are loaded at once, and an AOF
// rewrite (Redis forks) may copy a whole server's pages in the worst case.
func (s Settings) HostMemoryNeed() int64 { return 3 * s.KeyBytes() }

// GuestMemoryNeed is the memory the first guest needs on vm platforms: the
// baseline's whole key space, its share of the shards, the rewrite's
// worst case and the guest's own system.
func (s Settings) GuestMemoryNeed() int64 {
	shards := int64(1)
	if s.Guests == GuestsOne {
		shards = int64(s.Redis)
	}
	data := s.KeyBytes() + s.KeyBytes()*shards/int64(s.Redis)
	return data + s.KeyBytes() + guestOverhead
}

// Validate checks the settings against machine m: everything that cannot
// run is refused before anything starts, with the limit.
func (s Settings) Validate(m Machine) error {
	if s.Pipeline < 1 {
		return fmt.Errorf("parameter pipeline %d: a pipeline holds at least 1 command", s.Pipeline)
	}
	if !(s.GetRatio >= 0 && s.GetRatio <= 1) {
		return fmt.Errorf("parameter get_ratio %g: want a share from 0 to 1", s.GetRatio)
	}
	if s.Keyspace < 1 || s.Keyspace > respc.MaxKeyspace {
		return fmt.Errorf("parameter keyspace %d: want 1 to %d keys", s.Keyspace, int64(respc.MaxKeyspace))
	}
	if s.Twemproxies > s.Redis {
		return fmt.Errorf("parameter twemproxies %d: more twemproxies than the %d Redis they shard over", s.Twemproxies, s.Redis)
	}
	if int64(s.Redis) > s.Keyspace {
		return fmt.Errorf("parameter keyspace %d: fewer keys than the %d Redis servers", s.Keyspace, s.Redis)
	}
	if s.DriverCPUs != "" {
		if _, err := platform.ParseCPUSet(s.DriverCPUs); err != nil {
			return fmt.Errorf("parameter driver_cpus: %w", err)
		}
	}
	if s.Pin == topology.PinSpread {
		if err := s.checkPin(m, "parameter pin spread"); err != nil {
			return err
		}
	}
	if need := s.HostMemoryNeed(); m.MemAvail > 0 && need > m.MemAvail {
		most := m.MemAvail / 3 / int64(BytesPerKey+s.ValueSize)
		return fmt.Errorf("parameter keyspace %d: the key space does not fit in memory with AOF: the baseline's copy and the shards' copy (%s each at %d bytes a key) and an AOF rewrite's worst case need %s, but %s is available: set keyspace to at most %d",
			s.Keyspace, gib(s.KeyBytes()), BytesPerKey+s.ValueSize, gib(need), gib(m.MemAvail), most)
	}
	if need := s.cacheDisk(); m.DiskAvail > 0 && need > m.DiskAvail {
		return fmt.Errorf("parameter keyspace %d: the data cache needs about %s of disk in %s, but %s is free",
			s.Keyspace, gib(need), CacheRoot(), gib(m.DiskAvail))
	}
	if conns := s.Drivers * s.Clients; conns > 60000 {
		return fmt.Errorf("parameters drivers x clients = %d connections: more than one HAProxy frontend can take from one host's ephemeral ports (60000)", conns)
	}
	return nil
}

// checkPin refuses pinning each Redis to a core of its own when there are
// more Redis than the cores left after driver_cpus; what names the setting
// that asked for the pinning.
func (s Settings) checkPin(m Machine, what string) error {
	free := m.CPUs
	if s.DriverCPUs != "" {
		d, _ := platform.ParseCPUSet(s.DriverCPUs)
		free -= len(d)
	}
	if s.Redis > free {
		return fmt.Errorf("%s: %d Redis need a core each, but this machine has %d CPU(s) left after driver_cpus: set redis to at most %d, or do not pin",
			what, s.Redis, max(free, 0), max(free, 0))
	}
	return nil
}

// cacheDisk is the disk the data cache needs: two copies of the key space
// as RDB, a build directory beside them.
func (s Settings) cacheDisk() int64 {
	return 2 * s.Keyspace * int64(RDBBytesPerKey+s.ValueSize) * 2
}

// ReadyTimeout is how long a Redis may take to load its data: a minute,
// plus a second per 50 000 keys (a Redis here loads 400 000 a second; an
// emulated guest far fewer).
func (s Settings) ReadyTimeout() time.Duration {
	return time.Minute + time.Duration(math.Ceil(float64(s.Keyspace)/50000))*time.Second
}

// Describe says what the trial runs, for its notes.
func (s Settings) Describe() string {
	d := fmt.Sprintf("%d Redis (AOF, appendfsync everysec) behind %d twemproxy (ketama, fnv1a_64, servers named redis0..) behind 1 HAProxy (tcp, round robin)", s.Redis, s.Twemproxies)
	if s.LBOnHost {
		d += ", the proxies beside the driver"
	}
	d += fmt.Sprintf("; load: pipelines of %d commands, %.0f%% GET / %.0f%% SET, %d-byte values, keys uniform over %d loaded keys; baseline: 1 Redis, 1 driver process x %d connections, direct; scale-out: %d driver processes x %d connections through HAProxy",
		s.Pipeline, s.GetRatio*100, (1-s.GetRatio)*100, s.ValueSize, s.Keyspace, s.Clients, s.Drivers, s.Clients)
	return d
}

// ScaledNote says what the machine's sizes changed from the seed, "" when
// nothing.
func (s Settings) ScaledNote() string {
	if len(s.scaled) == 0 {
		return ""
	}
	return "scaled to this machine (sizes: machine): " + strings.Join(s.scaled, "; ") + "; the seed's values: sizes: seed"
}
