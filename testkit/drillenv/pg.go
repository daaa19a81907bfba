package drillenv

// What only the PostgreSQL outage drill needs: a cluster of its own.

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/parleyhq/parley/testkit/pgcluster"
)

// PrivatePG is a PostgreSQL cluster of the test's own (testkit/pgcluster),
// on a free port: the drills stop and start it, never the shared server.
type PrivatePG struct {
	t testing.TB
	c *pgcluster.Cluster
	// URL is the address of its database parley.
	URL string
}

// StartPrivatePG starts a PrivatePG, removed when the test ends. fsync is
// off: a stop is a process kill, never a power cut, so the page cache
// keeps what was committed; synchronous_commit stays on.
func StartPrivatePG(t testing.TB) *PrivatePG {
	t.Helper()
	return StartPrivatePGWith(t, "fsync=off", "max_connections=200")
}

// StartPrivatePGWith starts a PrivatePG with these postgresql.conf
// settings (PostgreSQL's defaults for the others), removed when the test
// ends.
func StartPrivatePGWith(t testing.TB, settings ...string) *PrivatePG {
	t.Helper()
	dir, err := os.MkdirTemp("", "parley-drill-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(FreeAddr(t))
	port, _ := strconv.Atoi(portStr)
	c, err := pgcluster.Init(pgcluster.Options{Dir: dir, Port: port, Settings: settings})
	t.Cleanup(func() {
		if c != nil {
			_ = c.Stop()
		}
		os.RemoveAll(dir)
	})
	if err != nil {
		t.Fatalf("private postgres: %v", err)
	}
	if err := c.CreateDB("parley"); err != nil {
		t.Fatal(err)
	}
	return &PrivatePG{t: t, c: c, URL: c.URL("parley")}
}

// Start starts the cluster again and waits until it accepts connections.
func (pg *PrivatePG) Start() {
	pg.t.Helper()
	if err := pg.c.Start(); err != nil {
		pg.t.Fatal(err)
	}
}

// Stop kills the server (immediate: no checkpoint, clients cut off).
func (pg *PrivatePG) Stop() {
	pg.t.Helper()
	if err := pg.c.Stop(); err != nil {
		pg.t.Fatal(err)
	}
}

// Pid is the postmaster's process id (its descendants are the backends),
// for CPU figures by process tree (testkit/proccpu).
func (pg *PrivatePG) Pid() int {
	pg.t.Helper()
	pid, err := pg.c.Pid()
	if err != nil {
		pg.t.Fatal(err)
	}
	return pid
}
