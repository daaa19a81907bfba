//go:build drill

package main

// What only the crash drills need: a private PostgreSQL cluster and the
// tally of accepted contacts against recorded states and provider sends.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// outcomeCounts reads how many messages are in each state.
func outcomeCounts(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
	rows, err := pool.Query(ctx, `SELECT state::text, count(*) FROM messages GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// tally is the end state of a drill: every accepted contact against what
// the database recorded and what the provider received.
type tally struct {
	Accepted   int // contacts published
	Messages   int // message rows
	Terminal   int // rows in a terminal state
	Sent       int // rows sent, delivered or read
	Lost       int // accepted contacts without a terminal state
	Duplicates int64
	Received   int64 // sends the provider accepted
	Recipients int
	States     map[string]int
}

func (e *drillEnv) tally(accepted int) tally {
	e.t.Helper()
	states, err := outcomeCounts(e.ctx, e.pool)
	if err != nil {
		e.t.Fatal(err)
	}
	t := tally{Accepted: accepted, States: states}
	for s, n := range states {
		t.Messages += n
		switch s {
		case "sent", "delivered", "read":
			t.Sent += n
			t.Terminal += n
		case "failed", "skipped_opt_out":
			t.Terminal += n
		}
	}
	t.Lost = accepted - t.Terminal
	st := e.simStats()
	t.Received, t.Recipients = st.Accepted, st.Recipients
	t.Duplicates = st.Accepted - int64(st.Recipients)
	if st.UntrackedSends > 0 {
		e.t.Fatalf("provider-sim stopped counting per recipient (%d untracked)", st.UntrackedSends)
	}
	return t
}

// waitSettled waits until every accepted contact has a terminal state or
// the time is up, and returns the tally either way.
func (e *drillEnv) waitSettled(accepted int, within time.Duration) tally {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		t := e.tally(accepted)
		if t.Lost == 0 || time.Now().After(deadline) {
			return t
		}
		time.Sleep(250 * time.Millisecond)
	}
}
