package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/testkit/pgcluster"
)

// privateServers are a nats-server, a redis-server and a PostgreSQL cluster
// of the capacity run's own, on fixed loopback ports, so that the CPU each
// one uses and PostgreSQL's WAL are the run's alone (the shared local
// servers also serve other people's tests).
type privateServers struct {
	dir         string
	nats, redis *exec.Cmd
	pg          *pgcluster.Cluster
	pgPort      int
	natsURL     string
	redisAddr   string
	pgAdminURL  string
	natsMonitor string
	natsServer  string
}

// startPrivateServers starts the three servers on ports base+1 (NATS),
// base+2 (its monitoring), base+3 (Redis) and base+4 (PostgreSQL).
// natsServer is the nats-server binary; JetStream runs with sync_interval
// always, as in production (docs/operations.md, "NATS versions and sync_interval").
// PostgreSQL keeps its defaults (fsync and synchronous_commit on).
func startPrivateServers(ctx context.Context, natsServer string, base int) (_ *privateServers, err error) {
	dir, err := os.MkdirTemp("", "parley-capacity-")
	if err != nil {
		return nil, err
	}
	s := &privateServers{dir: dir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	for _, p := range []int{base + 1, base + 2, base + 3, base + 4} {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			return nil, fmt.Errorf("port %d is taken (-port-base moves the run's ports): %w", p, err)
		} else {
			ln.Close()
		}
	}

	// NATS.
	store := filepath.Join(dir, "jetstream")
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream { store_dir: %q, sync_interval: always }\n", base+1, base+2, store)
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	s.natsServer = natsServer
	if err := s.startNATS(); err != nil {
		return nil, err
	}
	s.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", base+1)
	s.natsMonitor = fmt.Sprintf("http://127.0.0.1:%d", base+2)

	// Redis, nothing kept on disk (as the local one).
	s.redis = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(base+3), "--save", "", "--appendonly", "no", "--dir", dir)
	s.redis.Stdout = s.nats.Stdout
	s.redis.Stderr = s.nats.Stdout
	s.redis.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.redis.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s.redisAddr = fmt.Sprintf("127.0.0.1:%d", base+3)

	// PostgreSQL (testkit/pgcluster), with its defaults but connections.
	s.pgPort = base + 4
	if s.pg, err = pgcluster.Init(pgcluster.Options{Dir: dir, Port: s.pgPort,
		Settings: []string{"max_connections=300"}, StartTimeout: 120 * time.Second}); err != nil {
		return nil, err
	}
	s.pgAdminURL = s.pg.URL("postgres")

	// Wait for NATS and Redis.
	deadline := time.Now().Add(30 * time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: s.redisAddr})
	defer rdb.Close()
	for {
		natsUp := false
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.natsURL, "nats://"), time.Second); err == nil {
			c.Close()
			natsUp = true
		}
		if natsUp && rdb.Ping(ctx).Err() == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("nats-server or redis-server not up within 30 s (log %s)", filepath.Join(dir, "nats.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNATS starts nats-server on the run's configuration and store (again
// after killNATS: JetStream recovers the stream from its files), its output
// appended to nats.log.
func (s *privateServers) startNATS() error {
	c := exec.Command(s.natsServer, "--config", filepath.Join(s.dir, "nats.conf"))
	log, err := os.OpenFile(filepath.Join(s.dir, "nats.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.natsServer, err)
	}
	s.nats = c
	return nil
}

// killNATS SIGKILLs nats-server and waits for it to be gone: no shutdown,
// no flush, what was not on disk is lost.
func (s *privateServers) killNATS() error {
	if err := s.nats.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = s.nats.Wait()
	return nil
}

// pids are the servers' processes by name (PostgreSQL's postmaster, whose
// descendants are its backends and background workers).
func (s *privateServers) pids() (map[string]int, error) {
	pg, err := s.pg.Pid()
	if err != nil {
		return nil, err
	}
	return map[string]int{"nats-server": s.nats.Process.Pid, "redis-server": s.redis.Process.Pid, "postgres": pg}, nil
}

func (s *privateServers) stop() {
	var errs []error
	if s.pg != nil {
		if err := s.pg.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range []*exec.Cmd{s.nats, s.redis} {
		if c != nil && c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errors.Join(errs...))
	}
	_ = os.RemoveAll(s.dir)
}
