package ratelimit_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// benchGoroutines is the gateway's concurrency the benchmarks model.
const benchGoroutines = 64

// BenchmarkAllow compares one plain redis_rate Allow per request (the floor
// the gateway must beat) with Limiter.Allow, which does more (breaker,
// deadline, metrics, the fallback on standby) but shares round trips, and
// with redis_rate over go-redis's own experimental AutoPipeline for
// reference. 64 goroutines on the local Redis, 1000 keys (companies x
// routes), a limit high enough that every call is allowed and so writes.
//
//	go test -run '^$' -bench BenchmarkAllow -benchmem -count 5 ./ratelimit/
func BenchmarkAllow(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("company-%d:/api/campaigns/send", i)
	}
	lim := ratelimit.Every(1_000_000, time.Second)

	b.Run("redis_rate", func(b *testing.B) {
		cfg := ratelimittest.Config(b)
		// redis_rate puts its own "rate:" before the key: keep it under a
		// prefix the cleanup deletes.
		plainPrefix := cfg
		plainPrefix.KeyPrefix = "rate:" + cfg.KeyPrefix
		b.Cleanup(func() { _ = ratelimittest.DeleteKeys(plainPrefix) })
		rdb := ratelimit.NewRedisClient(cfg)
		defer rdb.Close()
		rl := redis_rate.NewLimiter(rdb)
		runAllowBench(b, keys, func(ctx context.Context, key string) error {
			_, err := rl.Allow(ctx, cfg.KeyPrefix+key, redis_rate.Limit(lim))
			return err
		})
	})

	b.Run("go-redis_AutoPipeline", func(b *testing.B) {
		cfg := ratelimittest.Config(b)
		plainPrefix := cfg
		plainPrefix.KeyPrefix = "rate:" + cfg.KeyPrefix
		b.Cleanup(func() { _ = ratelimittest.DeleteKeys(plainPrefix) })
		rdb := ratelimit.NewRedisClient(cfg)
		defer rdb.Close()
		ap, err := rdb.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		rl := redis_rate.NewLimiter(ap)
		runAllowBench(b, keys, func(ctx context.Context, key string) error {
			_, err := rl.Allow(ctx, cfg.KeyPrefix+key, redis_rate.Limit(lim))
			return err
		})
	})

	b.Run("parley", func(b *testing.B) {
		cfg := ratelimittest.Config(b)
		rdb := ratelimit.NewRedisClient(cfg)
		defer rdb.Close()
		l, err := ratelimit.New(rdb, cfg, zap.NewNop(), prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		runAllowBench(b, keys, func(ctx context.Context, key string) error {
			if res := l.Allow(ctx, key, lim); res.Local {
				return errAnsweredLocally
			}
			return nil
		})
	})
}

// errAnsweredLocally marks a call Redis did not answer: a benchmark of the
// Redis path must not be flattered by fast local answers.
var errAnsweredLocally = fmt.Errorf("answered locally")

func runAllowBench(b *testing.B, keys []string, allow func(ctx context.Context, key string) error) {
	var failed atomic.Int64
	var next atomic.Uint32
	ctx := context.Background()
	b.SetParallelism(max(1, benchGoroutines/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			i++
			if err := allow(ctx, keys[i%len(keys)]); err != nil {
				failed.Add(1)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
}
