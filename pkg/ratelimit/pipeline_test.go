package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// echoIncr answers with its key, its argument and the key's running total,
// so that a caller can tell its own reply from anybody else's. Its source
// carries a random tag, so that it is new to Redis and the first calls go
// through EVALSHA -> NOSCRIPT -> EVAL.
func echoIncr(tag string) *redis.Script {
	return redis.NewScript(fmt.Sprintf(`-- %s
return {KEYS[1], ARGV[1], redis.call("INCRBY", KEYS[1], ARGV[1])}`, tag))
}

func TestPipelineEveryCallerGetsItsOwnReply(t *testing.T) {
	everyCallerGetsItsOwnReply(t, ratelimittest.Config(t), 64, 300)
}

// everyCallerGetsItsOwnReply runs calls script calls in each of goroutines
// goroutines, one key each, through one autoPipeline on cfg, and checks
// every reply and that the calls were batched.
func everyCallerGetsItsOwnReply(t *testing.T, cfg ratelimit.RedisConfig, goroutines, calls int) {
	t.Helper()
	cfg.Timeout = 2 * time.Second // this test is about answers, not deadlines
	rdb := ratelimit.NewRedisClient(cfg)
	defer rdb.Close()
	p := ratelimit.NewAutoPipeline(rdb, cfg.KeyPrefix, cfg.Timeout)
	defer p.Close()
	script := echoIncr(t.Name() + cfg.KeyPrefix)

	ctx := context.Background()
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			key := fmt.Sprintf("g%d", g)
			total := int64(0)
			for i := range calls {
				arg := int64(g*1000 + i)
				v, err := script.Run(ctx, p, []string{key}, arg).Slice()
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, i, err)
					return
				}
				total += arg
				if len(v) != 3 || v[0] != cfg.KeyPrefix+key || v[1] != fmt.Sprint(arg) || v[2] != total {
					errs <- fmt.Errorf("goroutine %d call %d: reply %v, want [%s %d %d]", g, i, v, cfg.KeyPrefix+key, arg, total)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	batches, cmds := p.Stats()
	t.Logf("%d commands in %d pipelines", cmds, batches)
	if cmds < int64(goroutines*calls) {
		t.Fatalf("%d commands sent, want at least %d", cmds, goroutines*calls)
	}
	if batches*2 > cmds {
		t.Fatalf("%d commands in %d pipelines: concurrent calls were not batched", cmds, batches)
	}
}

func TestPipelineUnderRedisRate(t *testing.T) {
	// Many goroutines share keys with different limits; each key allows
	// exactly its burst, however the calls were batched.
	cfg := ratelimittest.Config(t)
	cfg.Timeout = 2 * time.Second
	rdb := ratelimit.NewRedisClient(cfg)
	defer rdb.Close()
	p := ratelimit.NewAutoPipeline(rdb, cfg.KeyPrefix, cfg.Timeout)
	defer p.Close()
	rl := redis_rate.NewLimiter(p)

	const keys, goroutines, callsEach = 16, 64, 40
	var mu sync.Mutex
	allowed := make(map[int]int)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range callsEach {
				k := (g + i) % keys
				res, err := rl.Allow(context.Background(), fmt.Sprintf("k%d", k), redis_rate.PerMinute(10+k))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Limit.Rate != 10+k {
					t.Errorf("key %d got the result of a limit of %d", k, res.Limit.Rate)
				}
				mu.Lock()
				allowed[k] += res.Allowed
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if allowed[k] != 10+k {
			t.Errorf("key %d allowed %d, want its burst %d", k, allowed[k], 10+k)
		}
	}
}

func TestPipelineCallEndsWithItsContext(t *testing.T) {
	cfg := ratelimittest.Config(t)
	rdb := ratelimit.NewRedisClient(cfg)
	defer rdb.Close()
	p := ratelimit.NewAutoPipeline(rdb, cfg.KeyPrefix, cfg.Timeout)
	defer p.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.EvalSha(ctx, "0000", []string{"k"}).Err()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: err %v, want context.Canceled", err)
	}

	p.Close()
	if err := p.Eval(context.Background(), "return 1", nil).Err(); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("after Close: err %v, want ErrClosed", err)
	}
}
