package ratelimittest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
)

// SentinelMaster is the master name the sentinels of NewSentinel watch.
const SentinelMaster = "parley"

// Sentinel is a private Redis Sentinel setup on loopback: a master, one
// replica and three sentinels (quorum 2) that fail over half a second after
// the master stops answering. Every process is killed when the test ends.
type Sentinel struct {
	t         testing.TB
	Master    *Server
	Replica   *Server
	Sentinels []*Server
}

// NewSentinel starts the master, its replica and the sentinels, and waits
// until the sentinels know the replica and each other. It skips t when
// redis-server is missing (see RequireEnv).
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	requireRedisServer(t)
	s := &Sentinel{t: t}
	taken := map[int]bool{}
	s.Master = startOnFreePort(t, taken, func(port int, dir string) *Server {
		return &Server{t: t, port: port, dir: dir}
	})
	s.Replica = startOnFreePort(t, taken, func(port int, dir string) *Server {
		return &Server{t: t, port: port, dir: dir, args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(s.Master.port)}}
	})
	for range 3 {
		s.Sentinels = append(s.Sentinels, startOnFreePort(t, taken, func(port int, dir string) *Server {
			conf := filepath.Join(dir, "sentinel.conf")
			body := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
				"sentinel down-after-milliseconds %[1]s 500\n"+
				"sentinel failover-timeout %[1]s 5000\n"+
				"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, s.Master.port)
			if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			return &Server{t: t, port: port, dir: dir, args: []string{conf, "--sentinel"}}
		}))
	}
	// Ready when every sentinel knows the replica and the two other
	// sentinels: a failover can then be agreed and has somewhere to go.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, sn := range s.Sentinels {
		rdb := sn.client()
		for {
			info, _ := rdb.Info(ctx, "sentinel").Result()
			if strings.Contains(info, "slaves=1,sentinels=3") {
				break
			}
			if ctx.Err() != nil {
				_ = rdb.Close()
				t.Fatalf("ratelimittest: sentinel %s not ready: %s", sn.Addr(), info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = rdb.Close()
	}
	return s
}

// Addrs is the sentinels' addresses, comma separated.
func (s *Sentinel) Addrs() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Config returns a sentinel-mode configuration with a test key prefix.
func (s *Sentinel) Config() ratelimit.RedisConfig {
	return ratelimit.RedisConfig{Mode: ratelimit.ModeSentinel, Addr: s.Addrs(), MasterName: SentinelMaster,
		KeyPrefix: "parleytest:" + randomHex(6) + ":", Timeout: testTimeout}
}

// MasterAddrs is the master's address as each sentinel reports it.
func (s *Sentinel) MasterAddrs() []string {
	s.t.Helper()
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		rdb := sn.client()
		v, err := rdb.Do(context.Background(), "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
		_ = rdb.Close()
		if err != nil || len(v) != 2 {
			s.t.Fatalf("ratelimittest: SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %v %v", sn.Addr(), v, err)
		}
		out[i] = v[0] + ":" + v[1]
	}
	return out
}

// WaitMaster waits (up to 10 s) until every sentinel names addr as the
// master: the sentinel that led a failover tells the others a moment later.
func (s *Sentinel) WaitMaster(addr string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.MasterAddrs()
		if !slices.ContainsFunc(got, func(a string) bool { return a != addr }) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ratelimittest: sentinels name %q as master, want %s", got, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitReplicated waits until the replica has everything the master wrote.
func (s *Sentinel) WaitReplicated() {
	s.t.Helper()
	rdb := s.Master.client()
	defer rdb.Close()
	n, err := rdb.Wait(context.Background(), 1, 5*time.Second).Result()
	if err != nil || n < 1 {
		s.t.Fatalf("ratelimittest: WAIT for the replica: %d %v", n, err)
	}
}
