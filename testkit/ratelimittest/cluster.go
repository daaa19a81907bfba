package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ratelimit"
)

// RequireEnv names the variable that turns a missing redis-server from a
// skip into a failure for the cluster and sentinel tests (CI sets it).
const RequireEnv = "PARLEY_REQUIRE_REDIS_CLUSTER"

// Loopback ports the cluster and sentinel tests may use, each with its
// cluster bus port (+10000) free too.
const (
	portLow  = 7100
	portHigh = 7199
)

// testTimeout bounds each Redis call of the cluster and sentinel
// configurations: generous, so that a loaded CI machine does not turn a slow
// answer into a fallback the tests count (a dead node refuses at once).
const testTimeout = 500 * time.Millisecond

// requireRedisServer skips t when redis-server is not installed, unless
// RequireEnv is set.
func requireRedisServer(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(RedisServerPath); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("ratelimittest: %s is set and %s is missing: %v (apt-get install redis-server)", RequireEnv, RedisServerPath, err)
		}
		t.Skipf("ratelimittest: no %s (apt-get install redis-server; set %s=1 to fail instead)", RedisServerPath, RequireEnv)
	}
}

// freePort returns a port of the range whose cluster bus port is free too,
// starting at a random place so that concurrent test binaries seldom race
// for the same one (start retries when they do).
func freePort(taken map[int]bool) (int, error) {
	n := portHigh - portLow + 1
	off := rand.IntN(n)
	for i := range n {
		p := portLow + (off+i)%n
		if taken[p] {
			continue
		}
		ok := true
		for _, q := range []int{p, p + 10000} {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
			if err != nil {
				ok = false
				break
			}
			_ = l.Close()
		}
		if ok {
			taken[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("ratelimittest: no free port in %d-%d", portLow, portHigh)
}

// startOnFreePort starts a server made by mk on a free port of the range,
// trying other ports when the chosen one was taken meanwhile.
func startOnFreePort(t testing.TB, taken map[int]bool, mk func(port int, dir string) *Server) *Server {
	t.Helper()
	var last error
	for range 5 {
		port, err := freePort(taken)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := mk(port, dir)
		if last = s.start(); last == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatal(last)
	return nil
}

// Cluster is a private Redis Cluster of three masters (no replicas) on
// loopback, each node its own redis-server killed when the test ends. A
// node's slots stay unserved while it is down; the others keep serving
// (cluster-require-full-coverage no), as a cluster whose master died does
// until its replica takes over.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
}

const clusterMasters = 3

// NewCluster starts a three-master cluster and waits until every node sees
// every slot served. It skips t when redis-server is missing (see
// RequireEnv).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	requireRedisServer(t)
	c := &Cluster{t: t}
	taken := map[int]bool{}
	for range clusterMasters {
		c.Nodes = append(c.Nodes, startOnFreePort(t, taken, func(port int, dir string) *Server {
			return &Server{t: t, port: port, dir: dir, args: []string{
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
			}}
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const slots = 16384 // NodeOf assumes this split
	for i, n := range c.Nodes {
		rdb := n.client()
		lo, hi := i*slots/len(c.Nodes), (i+1)*slots/len(c.Nodes)-1
		err := errors.Join(
			rdb.Do(ctx, "cluster", "set-config-epoch", i+1).Err(),
			rdb.Do(ctx, "cluster", "addslotsrange", lo, hi).Err(),
		)
		if err == nil && i > 0 {
			err = rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Nodes[0].port)).Err()
		}
		_ = rdb.Close()
		if err != nil {
			t.Fatalf("ratelimittest: set up cluster node %s: %v", n.Addr(), err)
		}
	}
	c.waitHealthy(ctx, c.Nodes)
	return c
}

// client is a plain client of one server.
func (s *Server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
}

// waitHealthy waits until each of nodes reports the cluster ok and every
// slot assigned and served.
func (c *Cluster) waitHealthy(ctx context.Context, nodes []*Server) {
	c.t.Helper()
	for _, n := range nodes {
		rdb := n.client()
		var info string
		for {
			info, _ = rdb.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterMasters)) {
				break
			}
			if ctx.Err() != nil {
				_ = rdb.Close()
				c.t.Fatalf("ratelimittest: cluster node %s not ready: %s", n.Addr(), info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = rdb.Close()
	}
}

// WaitHealthy waits (up to 20 s) until every node is up and serving all
// slots again, after a node was restarted.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.waitHealthy(ctx, c.Nodes)
}

// Addrs is the nodes' addresses, comma separated, as PARLEY_REDIS_ADDR takes
// them.
func (c *Cluster) Addrs() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Config returns a cluster-mode configuration with a test key prefix.
func (c *Cluster) Config() ratelimit.RedisConfig {
	return ratelimit.RedisConfig{Mode: ratelimit.ModeCluster, Addr: c.Addrs(),
		KeyPrefix: "parleytest:" + randomHex(6) + ":", Timeout: testTimeout}
}

// NodeOf returns the node that serves key's slot (as set up: a third of the
// slots each, in order).
func (c *Cluster) NodeOf(key string) *Server {
	c.t.Helper()
	rdb := c.Nodes[0].client()
	defer rdb.Close()
	slot, err := rdb.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		c.t.Fatalf("ratelimittest: CLUSTER KEYSLOT %s: %v", key, err)
	}
	for i := len(c.Nodes) - 1; i > 0; i-- {
		if int(slot) >= i*16384/len(c.Nodes) {
			return c.Nodes[i]
		}
	}
	return c.Nodes[0]
}

// Keys returns the keys a node holds under prefix.
func (s *Server) Keys(prefix string) []string {
	s.t.Helper()
	rdb := s.client()
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		s.t.Fatalf("ratelimittest: KEYS on %s: %v", s.Addr(), err)
	}
	return keys
}
