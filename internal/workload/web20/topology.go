package web20

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/nearnative/nearnative/apps/olio"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/deploy"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/topology"
	"github.com/nearnative/nearnative/internal/workload"
)

// Roles of the topology: the seed's two containers per instance are the
// database and the web server, nginx and PHP-FPM sharing the web
// container (Group).
const (
	RoleDB  = "db"
	RoleFPM = "fpm"
	RoleWeb = "web"
	// GroupWeb is the web container's group.
	GroupWeb = "web"
)

// Readiness timeouts: MariaDB recovers and opens the copied data directory,
// PHP-FPM and nginx start in a second; a loaded machine needs more.
const (
	dbReadyTimeout  = 3 * time.Minute
	webReadyTimeout = 90 * time.Second
	probeTimeout    = 5 * time.Second
)

// instanceData is one instance's copy of the template: the data directory
// and the site, each at the same path on the host and wherever the server
// runs (a container mounts it there, a guest gets a copy there), so that
// the configuration can name it.
type instanceData struct {
	DB, Site string
	// Store is the template's file store, which every instance's nginx
	// serves read-only (uploads go to the site's own files/).
	Store string
}

// copyData copies the template for every instance into directories
// labelled with the run; remove takes them away again.
func copyData(t workload.Trial, tmpl *olio.Template, instances int) (_ []instanceData, remove func(), err error) {
	var dirs []string
	remove = func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	mysqlUID, mysqlGID, err := ids("mysql")
	if err != nil {
		return nil, remove, err
	}
	wwwUID, wwwGID, err := ids("www-data")
	if err != nil {
		return nil, remove, err
	}
	out := make([]instanceData, instances)
	for i := range out {
		out[i].Store = tmpl.FilesDir()
		for _, what := range []string{"db", "site"} {
			d, err := state.TempDir(t.Run, fmt.Sprintf("web20-%s-i%d-%s", t.Name, i, what))
			if err != nil {
				return nil, remove, err
			}
			dirs = append(dirs, d)
			if what == "db" {
				out[i].DB = d
				err = tmpl.CopyDB(d, mysqlUID, mysqlGID)
			} else {
				out[i].Site = d
				err = tmpl.CopySite(d, wwwUID, wwwGID)
			}
			if err != nil {
				return nil, remove, fmt.Errorf("copying the Olio template for instance %d: %w", i, err)
			}
		}
	}
	return out, remove, nil
}

// ids returns the host's uid and gid of a system user. The copies are
// given to the host's users; volumes marked Own are given again to the
// user as it exists where the server runs.
func ids(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("system user %s (installed with mariadb-server and nginx; make setup): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// topology is the trial's topology: per instance MariaDB, then PHP-FPM,
// then nginx, each started when the one before answers at the protocol
// level; nginx is the entry point the driver reaches.
func (in *Instance) topology(data []instanceData) topology.Topology {
	s := in.s
	t := s.Topology
	t.Roles = []topology.Role{
		{
			Name: RoleDB, Ports: []string{olio.PortMySQL}, ReadyTimeout: dbReadyTimeout,
			Ready: func(ctx context.Context, addr string) error { return olio.ReadyDB(ctx, addr, probeTimeout) },
			Spec: func(id topology.ServerID, _ topology.Peers) (platform.Spec, error) {
				d := data[id.Instance]
				return olio.MariaDBSpec(olio.MariaDBSettings{DataDir: d.DB, BufferPool: s.BufferPool,
					Volumes: []platform.Volume{{HostPath: d.DB, Path: d.DB, Own: true}}})
			},
		},
		{
			// The site is not marked Own: CopySite gave its writable
			// directories to the host's www-data, uid 33 in every Debian
			// (the image and the guests too), and every platform keeps the
			// owners (a bind mount; a guest's copy, as tar does).
			Name: RoleFPM, Ports: []string{olio.PortFCGI}, After: []string{RoleDB}, Group: GroupWeb, ReadyTimeout: webReadyTimeout,
			Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
				d := data[id.Instance]
				return olio.FPMSpec(olio.FPMSettings{SiteDir: d.Site, DBAddr: peers.Addr(RoleDB, 0, olio.PortMySQL), Children: s.Children,
					Volumes: []platform.Volume{{HostPath: d.Site, Path: d.Site}}})
			},
		},
		{
			Name: RoleWeb, Ports: []string{olio.PortHTTP}, After: []string{RoleFPM}, Group: GroupWeb, Entry: true, ReadyTimeout: webReadyTimeout,
			Spec: func(id topology.ServerID, peers topology.Peers) (platform.Spec, error) {
				d := data[id.Instance]
				return olio.NginxSpec(olio.NginxSettings{SiteDir: d.Site, FPMAddr: peers.Addr(RoleFPM, 0, olio.PortFCGI),
					FileStore: d.Store, Workers: s.Workers, Connections: s.Connections,
					Volumes: []platform.Volume{{HostPath: d.Site, Path: d.Site}, {HostPath: d.Store, Path: d.Store, ReadOnly: true}}})
			},
		},
	}
	// PHP-FPM's own probe runs the site's check page over FastCGI (PHP
	// extensions, writable directories, the database), so that a missing
	// extension is named with PHP-FPM's log; its port is reached from the
	// host on every platform (a container's bridge address, a guest's).
	t.Roles[1].ReadyFor = func(ctx context.Context, id topology.ServerID, addr string) error {
		return olio.ReadyFPM(ctx, addr, data[id.Instance].Site, probeTimeout)
	}
	t.Roles[2].Ready = func(ctx context.Context, addr string) error {
		return olio.ReadyWeb(ctx, "http://"+addr, probeTimeout)
	}
	return t
}

// template returns the Olio data the trial copies, loading it once (the
// first trial of a run, or of the machine, builds it; later ones find it in
// the cache).
func (in *Instance) template(ctx context.Context, t workload.Trial) (*olio.Template, error) {
	if t.Builder() == nil {
		return nil, errors.New("web20 loads its data with the native platform's MariaDB, and the engine gave this trial none")
	}
	cache := in.cacheDir
	if cache == "" {
		cache = olio.CacheDir(state.Home())
	}
	return olio.EnsureTemplate(ctx, olio.Builder{Platform: t.Builder(), CacheDir: cache,
		LogDir: t.LogDir, Log: t.Log}, in.s.dataSize())
}

// Parameters of the seed's two-VM variant.
const (
	// ParamVMSplit names the platforms on which each instance's database
	// goes to a guest of its own.
	ParamVMSplit = "vm_split"
	// ParamDBVCPUs is the vCPU count of the database's guest there.
	ParamDBVCPUs = "db_vcpus"
	// SplitAll as vm_split: every vm platform of the study.
	SplitAll = "all"
)

// splitOn reports whether vm_split asks for the two-VM variant on platform
// name.
func (s Settings) splitOn(name string) bool {
	return slices.Contains(s.VMSplit, SplitAll) || slices.Contains(s.VMSplit, name)
}

// split applies vm_split to the trial's topology on platform p: on a vm
// platform each instance's database goes to a guest of its own (vms
// counting guest pairs), sized db_vcpus; elsewhere it is ignored. It
// returns the note that says which, or "" when vm_split does not name p.
func (in *Instance) split(p platform.Platform, t *topology.Topology) string {
	s := in.s
	if !s.splitOn(p.Name()) {
		return ""
	}
	be, ok := p.(deploy.Backend)
	if !ok || be.Machine().VCPUs == 0 {
		return fmt.Sprintf("%s: %s is not a VM platform, so every instance runs as it does without the parameter", ParamVMSplit, p.Name())
	}
	for i := range t.Roles {
		if t.Roles[i].Name == RoleDB {
			t.Roles[i].OwnGuest = true
			t.Roles[i].GuestVCPUs = s.DBVCPUs
		}
	}
	vms := max(t.VMs, 1)
	t.VMs = 2 * vms
	m := be.Machine()
	db := m.VCPUs
	if s.DBVCPUs > 0 {
		db = s.DBVCPUs
	}
	return fmt.Sprintf("%s: the seed's two-VM variant: each instance's web tier (nginx and PHP-FPM) in one guest, its database in another, %d guest(s) of each kind (vms %d doubled), web guests of %d vCPUs and database guests of %d, each with %d MiB (the seed: one 6-vCPU and one 2-vCPU VM, 2 GB each); the database traffic crosses the run's bridge between guests",
		ParamVMSplit, vms, vms, m.VCPUs, db, m.GuestMemory>>20)
}
