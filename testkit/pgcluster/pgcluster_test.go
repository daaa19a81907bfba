package pgcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A cluster starts on its port, serves its database, stops and starts
// again with what was committed.
func TestClusterStopsAndStarts(t *testing.T) {
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	c, err := Init(Options{Dir: dir, Port: port, Settings: []string{"fsync=off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if err := c.CreateDB("pgcluster"); err != nil {
		t.Fatal(err)
	}
	query := func(sql string) string {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), c.URL("pgcluster"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var out string
		if err := conn.QueryRow(context.Background(), sql).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := query(`SHOW port`); got != strconv.Itoa(port) {
		t.Fatalf("port %s, want %d", got, port)
	}
	if got := query(`SHOW fsync`); got != "off" {
		t.Fatalf("fsync %s, want the setting off", got)
	}
	conn, err := pgx.Connect(context.Background(), c.URL("pgcluster"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `CREATE TABLE kept AS SELECT 'yes'::text AS v`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid, err := c.Pid()
	if err != nil || pid <= 0 {
		t.Fatalf("pid %d, %v", pid, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pgdata", "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid after Stop: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if got := query(`SELECT v FROM kept`); got != "yes" {
		t.Fatalf("after a restart: %q", got)
	}
}

// BinDir finds the server's programs on this machine.
func TestBinDir(t *testing.T) {
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"initdb", "pg_ctl", "createdb"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if version("/usr/lib/postgresql/15/bin") != 15 || version("/usr/bin") != 0 {
		t.Error("version of a bin folder")
	}
}
