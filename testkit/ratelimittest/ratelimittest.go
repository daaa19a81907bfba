// Package ratelimittest gives tests Redis of their own: a key prefix no
// other test uses on the shared local Redis (its keys deleted when the test
// ends), or a private redis-server process for outage drills.
package ratelimittest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ratelimit"
)

// SharedAddr is the local Redis; PARLEY_TEST_REDIS_ADDR overrides it.
func SharedAddr() string {
	if a := os.Getenv("PARLEY_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// Config returns a configuration for the shared local Redis with a key
// prefix of t's own; every key under it is deleted when t ends.
func Config(t testing.TB) ratelimit.RedisConfig {
	t.Helper()
	cfg := ratelimit.RedisConfig{
		Addr:      SharedAddr(),
		KeyPrefix: "parleytest:" + randomHex(6) + ":",
		Timeout:   50 * time.Millisecond,
	}
	t.Cleanup(func() {
		if err := DeleteKeys(cfg); err != nil {
			t.Logf("ratelimittest: delete keys under %s: %v", cfg.KeyPrefix, err)
		}
	})
	return cfg
}

// DeleteKeys deletes every key under cfg.KeyPrefix.
func DeleteKeys(cfg ratelimit.RedisConfig) error {
	if cfg.KeyPrefix == "" {
		return fmt.Errorf("refusing to delete every key: empty prefix")
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr, Password: cfg.Password, DB: cfg.DB})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, cfg.KeyPrefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("del: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// RedisServerPath is the redis-server binary NewServer runs.
const RedisServerPath = "/usr/bin/redis-server"

// Server is a private redis-server on a free loopback port, killed when the
// test ends, pass or fail. Stop kills it (an outage); Start brings it back on
// the same port, empty (nothing is kept on disk but a cluster node's
// nodes.conf, so that a restarted node rejoins its cluster).
type Server struct {
	t    testing.TB
	port int
	dir  string
	args []string // beyond port, bind, persistence and dir
	cmd  *exec.Cmd
	done chan struct{}
}

// NewServer starts a private redis-server.
func NewServer(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(RedisServerPath); err != nil {
		t.Fatalf("ratelimittest: %s: %v", RedisServerPath, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ratelimittest: free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, port: port, dir: t.TempDir(), args: []string{"--enable-debug-command", "local"}}
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Config returns a configuration for the server with a test key prefix.
func (s *Server) Config() ratelimit.RedisConfig {
	return ratelimit.RedisConfig{Addr: s.Addr(), KeyPrefix: "parleytest:" + randomHex(6) + ":", Timeout: 50 * time.Millisecond}
}

// Start starts (or restarts) the server and waits until it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// start is Start reporting failure instead of failing the test, so that a
// caller may try other ports.
func (s *Server) start() error {
	if s.cmd != nil {
		return errors.New("ratelimittest: server already running")
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning"}
	if len(s.args) > 0 && !strings.HasPrefix(s.args[0], "--") {
		// A configuration file comes first.
		args = append([]string{s.args[0]}, append(args, s.args[1:]...)...)
	} else {
		args = append(args, s.args...)
	}
	cmd := exec.Command(RedisServerPath, args...)
	// Die with the test binary even if it is killed before its cleanups run.
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ratelimittest: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("ratelimittest: redis-server on port %d exited at start", s.port)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("ratelimittest: redis-server on port %d not ready: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: an abrupt outage) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
