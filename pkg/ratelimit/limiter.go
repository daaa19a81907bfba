package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Key namespaces under RedisConfig.KeyPrefix. redis_rate adds "rate:", so a
// gateway key lands at "<prefix>rate:req:<key>".
const (
	requestNS    = "req:"
	throughputNS = "tp:"
)

// Reasons a call was answered by the per-process fallback, the values of the
// reason label of parley_ratelimit_fallback_total.
const (
	ReasonTimeout     = "timeout"      // Redis did not answer within RedisConfig.Timeout
	ReasonError       = "error"        // Redis answered with an error or the connection failed
	ReasonCircuitOpen = "circuit_open" // Redis was skipped: it failed recently
	ReasonCanceled    = "canceled"     // the caller's context ended first
)

// Limiter enforces Parley's rate limits in Redis with GCRA (redis_rate), one
// state per key shared by every replica: Allow for the gateway's request
// limits, Take and Wait for the dispatchers' throughput limits.
//
// Redis trouble never reaches the caller. Each Redis call is bounded by
// RedisConfig.Timeout; when it fails, times out, or Redis is being skipped
// after recent failures (a circuit breaker with a growing pause), the call is
// answered by a per-process GCRA limiter with the same limit. While degraded,
// limits therefore hold per replica, not for the whole fleet: N gateway
// replicas may together allow up to N times a limit. The breaker's
// transitions are logged (a few lines per outage, not one per request), each
// fallback is counted in parley_ratelimit_fallback_total{reason}, and
// parley_ratelimit_degraded is 1 while the breaker is open.
//
// Concurrent calls share Redis round trips: they are sent as pipelines (see
// autoPipeline), which is what lets a gateway do more per request than a
// plain redis_rate call and still be faster.
type Limiter struct {
	pipe    *autoPipeline
	rl      *redis_rate.Limiter
	local   *localGCRA
	breaker *breaker
	log     *zap.Logger

	fallbacks    map[string]prometheus.Counter
	fallbackSeen atomic.Int64 // fallbacks since the last log line
	lastLog      atomic.Int64 // unix nanos of the last per-call log line
	degraded     prometheus.Gauge

	closeOnce sync.Once
}

// New returns a Limiter on rdb (made by NewRedisClient: one server, a
// sentinel-watched master or a cluster) with keys under
// cfg.KeyPrefix and calls bounded by cfg.Timeout. Its metrics are registered
// on reg when reg is not nil. Close stops it; rdb stays open.
func New(rdb redis.UniversalClient, cfg RedisConfig, log *zap.Logger, reg prometheus.Registerer) (*Limiter, error) {
	if cfg.Timeout <= 0 {
		return nil, errors.New("ratelimit: timeout must be positive")
	}
	if log == nil {
		log = zap.NewNop()
	}
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_ratelimit_fallback_total",
		Help: "Rate-limit decisions made by the per-process limiter because Redis was unavailable, by reason.",
	}, []string{"reason"})
	degraded := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "parley_ratelimit_degraded",
		Help: "1 while Redis is being skipped and limits hold per process, else 0.",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{fallbacks, degraded} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ratelimit: register metrics: %w", err)
			}
		}
	}
	l := &Limiter{
		local:     newLocalGCRA(nil),
		log:       log,
		fallbacks: map[string]prometheus.Counter{},
		degraded:  degraded,
	}
	for _, r := range []string{ReasonTimeout, ReasonError, ReasonCircuitOpen, ReasonCanceled} {
		l.fallbacks[r] = fallbacks.WithLabelValues(r)
	}
	l.breaker = &breaker{
		now: time.Now,
		onOpen: func(err error, pause time.Duration) {
			degraded.Set(1)
			log.Warn("redis unavailable for rate limiting; limits now hold per process",
				zap.Error(err), zap.Duration("next_probe_in", pause))
		},
		onStillOpen: func(err error, pause, downFor time.Duration) {
			if l.logDue() {
				log.Warn("redis still unavailable for rate limiting; limits hold per process",
					zap.Error(err), zap.Duration("down_for", downFor), zap.Duration("next_probe_in", pause),
					zap.Int64("fallbacks", l.fallbackSeen.Swap(0)))
			}
		},
		onClose: func(downFor time.Duration) {
			degraded.Set(0)
			log.Info("redis rate limiting recovered",
				zap.Duration("down_for", downFor), zap.Int64("fallbacks", l.fallbackSeen.Swap(0)))
		},
	}
	l.pipe = newAutoPipeline(rdb, cfg.KeyPrefix, cfg.Timeout)
	l.rl = redis_rate.NewLimiter(l.pipe)
	return l, nil
}

// Close stops the pipeline workers. Calls after Close are answered locally.
func (l *Limiter) Close() {
	l.closeOnce.Do(l.pipe.Close)
}

// Allow reports whether one request on key may proceed under lim. It never
// fails: when Redis cannot answer in time the per-process limiter does (and
// Result.Local says so). An invalid lim (see Limit.Validate) refuses every
// request, the safe side of a configuration mistake the gateway's tests
// should catch.
func (l *Limiter) Allow(ctx context.Context, key string, lim Limit) Result {
	if lim.Validate() != nil {
		return Result{Limit: lim, RetryAfter: time.Second}
	}
	key = requestNS + key
	var out outcome
	answered := false
	if useRedis, probe := l.breaker.allow(); useRedis {
		res, err := l.rl.Allow(ctx, key, redis_rate.Limit(lim))
		out, answered = l.settle(ctx, probe, res, err)
	} else {
		l.fellBack(ReasonCircuitOpen, nil)
	}
	if !answered {
		out = l.local.allowN(key, lim, 1)
	}
	return Result{
		Allowed:    out.allowed > 0,
		Limit:      lim,
		Remaining:  out.remaining,
		RetryAfter: out.retryAfter,
		ResetAfter: out.resetAfter,
		Local:      !answered,
	}
}

// settle turns a Redis answer into an outcome and tells the breaker; on
// failure it counts the fallback and reports false, and the caller decides
// locally.
func (l *Limiter) settle(ctx context.Context, probe bool, res *redis_rate.Result, err error) (outcome, bool) {
	if err == nil {
		l.breaker.success(probe)
		// Redis's clock counts microseconds; finer digits are float noise.
		out := outcome{
			allowed:    res.Allowed,
			remaining:  res.Remaining,
			retryAfter: max(res.RetryAfter.Round(time.Microsecond), 0),
			resetAfter: max(res.ResetAfter.Round(time.Microsecond), 0),
		}
		if res.Allowed > 0 {
			out.retryAfter = 0
			out.remaining = wholeRemaining(res)
		}
		return out, true
	}
	if ctx.Err() != nil {
		// The caller gave up, which says nothing about Redis.
		l.breaker.abort(probe)
		l.fellBack(ReasonCanceled, nil)
		return outcome{}, false
	}
	l.breaker.failure(probe, err)
	reason := ReasonError
	if isTimeout(err) {
		reason = ReasonTimeout
	}
	l.fellBack(reason, err)
	return outcome{}, false
}

// fellBack counts a local decision, and logs a Redis failure that did not
// (yet) open the breaker at most once per breakerLogInterval.
func (l *Limiter) fellBack(reason string, err error) {
	l.fallbacks[reason].Inc()
	l.fallbackSeen.Add(1)
	if err != nil && !l.breaker.degraded() && l.logDue() {
		l.log.Warn("redis rate-limit call failed; answered by the per-process limiter",
			zap.String("reason", reason), zap.Error(err), zap.Int64("fallbacks", l.fallbackSeen.Swap(0)))
	}
}

// logDue reports whether breakerLogInterval has passed since the last
// throttled log line, and claims the slot if so.
func (l *Limiter) logDue() bool {
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	return now-last >= int64(breakerLogInterval) && l.lastLog.CompareAndSwap(last, now)
}

// wholeRemaining recomputes an allowed result's Remaining from its
// ResetAfter. The Lua script divides floats around 3e8 (seconds since 2017)
// and truncates, so a whole 9 comes back as 8 (8.9999999); the same quantity,
// burst - resetAfter/emission, computed here with a microsecond of tolerance
// (Redis's clock resolution) is exact, and matches the local limiter.
func wholeRemaining(res *redis_rate.Result) int {
	l := res.Limit
	emission := l.Period / time.Duration(l.Rate)
	n := int((emission*time.Duration(l.Burst) - res.ResetAfter + time.Microsecond) / emission)
	return min(max(n, res.Remaining), l.Burst-1)
}

func isTimeout(err error) bool {
	if errors.Is(err, errTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ThroughputBurst is the burst Take allows for a rate: a tenth of a second of
// sending, at least one message. A burst of a full second would let a fresh
// key send two seconds' worth within its first second, which a provider
// counting per second answers with 130429.
func ThroughputBurst(perSecond int) int { return max(1, perSecond/10) }

// Take asks for up to want sends on key (a messaging account) at perSecond,
// shared by every replica that uses the same key, and returns how many it may
// make now. When it grants none, retryIn says when one will be available.
// Up to ThroughputBurst(perSecond) may be granted at once. Once ctx has
// ended Take grants nothing: a caller that gave up (a dispatcher shutting
// down) must not be handed permits the shared limit never counted.
//
// On Redis failure Take falls back to a per-process limiter at the same rate,
// so N dispatcher replicas may together send up to N times the rate while
// Redis is down; the provider then answers 130429, which the dispatcher
// retries. perSecond or want below 1 grant nothing.
func (l *Limiter) Take(ctx context.Context, key string, perSecond, want int) (granted int, retryIn time.Duration) {
	if want < 1 {
		return 0, 0
	}
	if perSecond < 1 {
		return 0, time.Second
	}
	lim := Limit{Rate: perSecond, Burst: ThroughputBurst(perSecond), Period: time.Second}
	key = throughputNS + key
	var out outcome
	answered := false
	if useRedis, probe := l.breaker.allow(); useRedis {
		res, err := allowAtMostWhole(ctx, l.pipe, key, lim, want)
		out, answered = l.settle(ctx, probe, res, err)
	} else {
		l.fellBack(ReasonCircuitOpen, nil)
	}
	if !answered {
		if ctx.Err() != nil {
			return 0, time.Millisecond
		}
		out = l.local.allowAtMost(key, lim, want)
	}
	if out.allowed > 0 {
		return out.allowed, 0
	}
	return 0, max(out.retryAfter, time.Millisecond)
}

// Wait blocks until n sends on key at perSecond are granted (in as many
// Takes as the burst requires) or ctx ends, whose error it then returns.
// Permits granted before ctx ended are spent.
func (l *Limiter) Wait(ctx context.Context, key string, perSecond, n int) error {
	_, err := l.WaitEach(ctx, key, perSecond, n, nil)
	return err
}

// WaitEach is Wait that hands each grant to use (when not nil) as it comes,
// so that the first sends start with the first permits rather than after the
// last. When ctx ends first it returns how many of the n were not granted,
// for the caller to give back, with ctx's error; it takes nothing once ctx
// has ended.
func (l *Limiter) WaitEach(ctx context.Context, key string, perSecond, n int, use func(granted int)) (left int, err error) {
	var timer *time.Timer
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		granted, retryIn := l.Take(ctx, key, perSecond, n)
		if granted > 0 {
			if use != nil {
				use(granted)
			}
			n -= granted
			continue
		}
		if timer == nil {
			timer = time.NewTimer(retryIn)
			defer timer.Stop()
		} else {
			timer.Reset(retryIn)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return 0, nil
}
