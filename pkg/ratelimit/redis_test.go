package ratelimit_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ratelimit"
)

// redisOnly is a configuration of just the Redis part, for envconfig.
type redisOnly struct{ Redis ratelimit.RedisConfig }

func (c redisOnly) Validate() error { return c.Redis.Validate() }

func TestRedisConfigFromEnvironment(t *testing.T) {
	for _, tt := range []struct {
		env     []string
		want    []string // addresses
		client  string   // the client type NewRedisClient picks
		wantErr string
	}{
		{env: nil, want: []string{"127.0.0.1:6379"}, client: "*redis.Client"},
		{env: []string{"PARLEY_REDIS_MODE=cluster", "PARLEY_REDIS_ADDR=10.0.0.1:7000, 10.0.0.2:7000,,10.0.0.3:7000"},
			want: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}, client: "*redis.ClusterClient"},
		{env: []string{"PARLEY_REDIS_MODE=cluster", "PARLEY_REDIS_ADDR=redis-cluster:6379"},
			want: []string{"redis-cluster:6379"}, client: "*redis.ClusterClient"},
		{env: []string{"PARLEY_REDIS_MODE=sentinel", "PARLEY_REDIS_ADDR=s1:26379,s2:26379,s3:26379", "PARLEY_REDIS_MASTER_NAME=parley",
			"PARLEY_REDIS_SENTINEL_PASSWORD=x"}, want: []string{"s1:26379", "s2:26379", "s3:26379"}, client: "*redis.Client"},
		{env: []string{"PARLEY_REDIS_ADDR=a:1,b:2"}, wantErr: "lists several servers"},
		{env: []string{"PARLEY_REDIS_ADDR= , "}, wantErr: "PARLEY_REDIS_ADDR is empty"},
		{env: []string{"PARLEY_REDIS_ADDR=redis"}, wantErr: `entry "redis" is not host:port`},
		{env: []string{"PARLEY_REDIS_MODE=sentinel", "PARLEY_REDIS_ADDR=s1:26379"}, wantErr: "PARLEY_REDIS_MASTER_NAME is empty"},
		{env: []string{"PARLEY_REDIS_MASTER_NAME=parley"}, wantErr: "needs PARLEY_REDIS_MODE=sentinel"},
		{env: []string{"PARLEY_REDIS_MODE=cluster", "PARLEY_REDIS_DB=2"}, wantErr: "PARLEY_REDIS_DB must be 0 in cluster mode"},
		{env: []string{"PARLEY_REDIS_MODE=replicated"}, wantErr: `PARLEY_REDIS_MODE "replicated"`},
		{env: []string{"PARLEY_REDIS_KEY_PREFIX={parley}:"}, wantErr: "must not contain { or }"},
	} {
		cfg, err := envconfig.LoadEnviron[redisOnly](tt.env)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.env, err)
			continue
		}
		if got := cfg.Redis.Addrs(); !slices.Equal(got, tt.want) {
			t.Errorf("%q: addresses %q, want %q", tt.env, got, tt.want)
		}
		rdb := ratelimit.NewRedisClient(cfg.Redis)
		var kind string
		switch rdb.(type) {
		case *redis.ClusterClient:
			kind = "*redis.ClusterClient"
		case *redis.Client:
			kind = "*redis.Client"
		}
		_ = rdb.Close()
		if kind != tt.client {
			t.Errorf("%q: client %T, want %s", tt.env, rdb, tt.client)
		}
	}
}

// TestCompanyKeysShareASlot: every key of a company, request or throughput,
// hashes to one Redis Cluster slot (the {c:<id>} tag after the prefix), and
// two companies' keys need not.
func TestCompanyKeysShareASlot(t *testing.T) {
	cfg := ratelimit.RedisConfig{KeyPrefix: "parley:"}
	tag := func(key string) string {
		_, rest, _ := strings.Cut(key, "{")
		tag, _, _ := strings.Cut(rest, "}")
		return tag
	}
	keys := []string{
		cfg.RequestKey(ratelimit.CompanyKey(42, "campaigns_send")),
		cfg.RequestKey(ratelimit.CompanyKey(42, "batch_status")),
		cfg.ThroughputKey(ratelimit.CompanyKey(42, "account:7")),
	}
	for _, k := range keys {
		if tag(k) != "c:42" {
			t.Errorf("key %q hashes on %q, want the company's tag c:42", k, tag(k))
		}
	}
	if tag(cfg.RequestKey(ratelimit.CompanyKey(43, "campaigns_send"))) == "c:42" {
		t.Error("two companies share a tag")
	}
}
