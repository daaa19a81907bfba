package drillenv

// What only the PostgreSQL outage drill needs: a cluster of its own.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// PrivatePG is a PostgreSQL cluster of the test's own (initdb and pg_ctl
// run as the postgres user), on a free port: the drills stop and start it,
// never the shared server.
type PrivatePG struct {
	t    testing.TB
	dir  string
	data string
	port int
	URL  string
}

const pgBin = "/usr/lib/postgresql/15/bin"

func asPostgres(args ...string) *exec.Cmd {
	return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
}

// StartPrivatePG starts a PrivatePG, removed when the test ends.
func StartPrivatePG(t testing.TB) *PrivatePG {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("private postgres: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "parley-drill-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(FreeAddr(t))
	port, _ := strconv.Atoi(portStr)
	pg := &PrivatePG{t: t, dir: dir, data: filepath.Join(dir, "data"), port: port,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/parley?sslmode=disable", port)}
	t.Cleanup(func() {
		_ = asPostgres(pgBin+"/pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").Run()
		os.RemoveAll(dir)
	})
	if out, err := asPostgres(pgBin+"/initdb", "-D", pg.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.Start()
	if out, err := asPostgres(pgBin+"/createdb", "-h", "127.0.0.1", "-p", portStr, "parley").CombinedOutput(); err != nil {
		t.Fatalf("createdb: %v\n%s", err, out)
	}
	return pg
}

// Start starts (or restarts) the cluster and waits until it accepts connections.
func (pg *PrivatePG) Start() {
	pg.t.Helper()
	// fsync off: a stop is a process kill, never a power cut, so the page
	// cache keeps what was committed; synchronous_commit stays on.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", pg.port, pg.dir)
	if out, err := asPostgres(pgBin+"/pg_ctl", "-D", pg.data, "-o", opts, "-l", filepath.Join(pg.dir, "server.log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		pg.t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// Stop kills the server (immediate: no checkpoint, clients cut off).
func (pg *PrivatePG) Stop() {
	pg.t.Helper()
	if out, err := asPostgres(pgBin+"/pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		pg.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// Pid is the postmaster's process id (its descendants are the backends),
// for CPU figures by process tree (testkit/proccpu).
func (pg *PrivatePG) Pid() int {
	pg.t.Helper()
	b, err := os.ReadFile(filepath.Join(pg.data, "postmaster.pid"))
	if err != nil {
		pg.t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		pg.t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}
