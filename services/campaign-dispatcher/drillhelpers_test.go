//go:build drill

package main

// What only the crash drills need: a private PostgreSQL cluster and the
// tally of accepted contacts at the provider and in the database.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// privatePG is a PostgreSQL cluster of the test's own (initdb and pg_ctl
// run as the postgres user), on a free port: the drills stop and start it,
// never the shared server.
type privatePG struct {
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

func startPrivatePG(t testing.TB) *privatePG {
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
	_, portStr, _ := net.SplitHostPort(freeAddr(t))
	port, _ := strconv.Atoi(portStr)
	pg := &privatePG{t: t, dir: dir, data: filepath.Join(dir, "data"), port: port,
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
func (pg *privatePG) Start() {
	pg.t.Helper()
	// fsync off: a stop is a process kill, never a power cut, so the page
	// cache keeps what was committed; synchronous_commit stays on.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", pg.port, pg.dir)
	if out, err := asPostgres(pgBin+"/pg_ctl", "-D", pg.data, "-o", opts, "-l", filepath.Join(pg.dir, "server.log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		pg.t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// Stop kills the server (immediate: no checkpoint, clients cut off).
func (pg *privatePG) Stop() {
	pg.t.Helper()
	if out, err := asPostgres(pgBin+"/pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		pg.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}
