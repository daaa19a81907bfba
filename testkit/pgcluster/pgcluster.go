// Package pgcluster runs a PostgreSQL cluster of the caller's own, on a
// port and in a directory of its own, for the drills that stop PostgreSQL
// and the load tests that measure its CPU and WAL: neither may touch the
// shared server. initdb and pg_ctl run as the postgres user.
package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options describe a cluster.
type Options struct {
	// Dir holds the data directory, the socket and the server's log; it
	// must exist, and Init gives it to the postgres user.
	Dir  string
	Port int
	// Settings are server settings (name=value) beside the port and the
	// loopback address, such as fsync=off or max_connections=300.
	Settings []string
	// StartTimeout bounds each start (60 s when zero).
	StartTimeout time.Duration
}

// Cluster is a running (or stopped) cluster.
type Cluster struct {
	o    Options
	bin  string
	data string
}

// Init creates the cluster (initdb, trust authentication, user postgres)
// and starts it.
func Init(o Options) (*Cluster, error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("a private PostgreSQL needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(o.Dir, uid, gid); err != nil {
		return nil, err
	}
	c := &Cluster{o: o, bin: bin, data: filepath.Join(o.Dir, "pgdata")}
	if out, err := c.run("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return c, c.Start()
}

// Start starts the cluster (again, after Stop) and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.o.Port, c.o.Dir)
	for _, s := range c.o.Settings {
		opts += " -c " + s
	}
	timeout := strconv.Itoa(int(c.o.StartTimeout.Seconds()))
	if out, err := c.run("pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(c.o.Dir, "postgres.log"), "-w", "-t", timeout, "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// Stop kills the server (immediate: no checkpoint, clients cut off).
func (c *Cluster) Stop() error {
	if out, err := c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// CreateDB creates the database name.
func (c *Cluster) CreateDB(name string) error {
	if out, err := c.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(c.o.Port), name); err != nil {
		return fmt.Errorf("createdb %s: %w\n%s", name, err, out)
	}
	return nil
}

// URL is the address of the database name, as the postgres user.
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.o.Port, name)
}

// Pid is the postmaster's process id (its descendants are the backends),
// for CPU figures by process tree (testkit/proccpu).
func (c *Cluster) Pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// run runs one of PostgreSQL's programs as the postgres user.
func (c *Cluster) run(program string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, program)
	var cmd *exec.Cmd
	if u, err := user.Current(); err == nil && u.Username == "postgres" {
		cmd = exec.Command(path, args...)
	} else {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return cmd.CombinedOutput()
}

// BinDir is the folder of the installed server's programs (initdb, pg_ctl):
// pg_config's bindir when it holds initdb, else the newest
// /usr/lib/postgresql/<version>/bin that does (Debian's layout, where
// pg_config may come with a newer libpq than the server), else the folder
// of the initdb on PATH.
func BinDir() (string, error) {
	has := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "initdb"))
		return dir != "" && err == nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil && has(strings.TrimSpace(string(out))) {
		return strings.TrimSpace(string(out)), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server programs (initdb): neither pg_config --bindir, /usr/lib/postgresql/*/bin nor PATH has them")
}

// version is the major version of a /usr/lib/postgresql/<version>/bin
// folder (0 when it is no number).
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}
