package dvdstore_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/apps/dvdstore/dvdstoretest"
	"github.com/nearnative/nearnative/internal/pgserver"
	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/platforms/native"
	"github.com/nearnative/nearnative/internal/runid"
	"github.com/nearnative/nearnative/internal/state"
	"github.com/nearnative/nearnative/internal/testenv"
)

// TestStackInDocker runs the shop as two containers on Docker's default
// bridge (container per server): the database from a copy of the template
// on a host volume, owned by the image's postgres uid (not the host's), and
// Apache reaching it at its bridge address.
func TestStackInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a template and starts containers")
	}
	run := runid.New()
	root := t.TempDir()
	ps := testenv.Platforms(t, run, root, platform.Native, platform.DockerBridge)
	tm := dvdstoretest.Template(t, ps[platform.Native].(*native.Platform))
	p := ps[platform.DockerBridge]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	uid, gid, err := pgserver.SystemUserIDs(ctx, p.(platform.JobRunner), "t1")
	if err != nil {
		t.Fatal(err)
	}
	hostUID, _, _ := dvdstore.SystemUser()
	t.Logf("postgres is uid %d gid %d in the image (%d on the host)", uid, gid, hostUID)
	dir, err := state.TempDir(run, "t1-db-data")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if _, err := tm.CopyTo(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	spec, err := dvdstore.DBSpec(dvdstore.DBConfig{Memory: 512 << 20, MaxConnections: 20, Data: platform.Volume{HostPath: data, Path: dvdstore.DataPath}})
	if err != nil {
		t.Fatal(err)
	}
	db := dvdstoretest.StartServer(t, ctx, p, spec)
	if err := dvdstore.DBReady(ctx, db.Addr(pgserver.Port)); err != nil {
		t.Fatalf("%v\n%s", err, dvdstoretest.LogTail(root, "t1-db"))
	}
	wspec, err := dvdstore.WebSpec(dvdstore.WebConfig{DBAddrs: []string{db.Addr(pgserver.Port)}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	web := dvdstoretest.StartServer(t, ctx, p, wspec)
	if err := dvdstore.WebReady(ctx, web.Addr(dvdstore.WebPort)); err != nil {
		t.Fatalf("%v\n%s", err, dvdstoretest.LogTail(root, "t1-web"))
	}
	t.Logf("db %s, web %s", db.Describe(), web.Describe())
	base := "http://" + web.Addr(dvdstore.WebPort)
	st, m, _ := post(t, base+"/purchase.php", url.Values{"customerid": {"9"}, "netamount": {"10.99"}, "taxamount": {"0.91"},
		"totalamount": {"11.90"}, "prod_id[]": {"7"}, "quantity[]": {"1"}})
	if id, _ := strconv.Atoi(m["orderid"]); st != 200 || id <= dvdstoretest.Dataset().Counts().Orders() {
		t.Errorf("purchase through the containers: %d %v", st, m)
	}
}
