package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// allowAtMostWholeScript is redis_rate v10's AllowAtMost script with one
// change. When fewer than the wanted events are available, redis_rate sets
// the cost to the fractional number available (say 1.7), charges all of it,
// and reports the truncated count (1): the 0.7 is paid for and never granted.
// Dispatcher replicas that wake up just after a permit frees up hit that case
// on almost every call, and the shared rate then falls well short of the
// account's (TestTakeChargesOnlyWhatItGrants shows it). Here a partial grant
// is the whole number available and only that is charged.
//
// Derived from redis_rate (BSD-2-Clause), itself from
// https://github.com/rwz/redis-gcra (Copyright (c) 2017 Pavel Pravosud, MIT).
var allowAtMostWholeScript = redis.NewScript(`
redis.replicate_commands()

local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])

local emission_interval = period / rate
local burst_offset = emission_interval * burst

local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

local tat = redis.call("GET", rate_limit_key)

if not tat then
  tat = now
else
  tat = tonumber(tat)
end

tat = math.max(tat, now)

local diff = now - (tat - burst_offset)
-- The epsilon absorbs floating-point noise: on a fresh key with a burst of 10
-- the division gives 9.999999999 where the answer is 10.
local remaining = diff / emission_interval + 1e-6

if remaining < 1 then
  local reset_after = tat - now
  local retry_after = emission_interval - diff
  return {
    0, -- allowed
    0, -- remaining
    tostring(retry_after),
    tostring(reset_after),
  }
end

remaining = math.floor(remaining)
if remaining < cost then
  cost = remaining
end
remaining = remaining - cost

local increment = emission_interval * cost
local new_tat = tat + increment

local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end

return {
  cost,
  remaining,
  tostring(-1),
  tostring(reset_after),
}
`)

// allowAtMostWhole runs allowAtMostWholeScript on key (under redis_rate's
// "rate:" namespace, like every other limiter key) and parses the reply as
// redis_rate does.
func allowAtMostWhole(ctx context.Context, rdb redis.Scripter, key string, l Limit, n int) (*redis_rate.Result, error) {
	v, err := allowAtMostWholeScript.Run(ctx, rdb, []string{"rate:" + key},
		l.Burst, l.Rate, l.Period.Seconds(), n).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 4 {
		return nil, fmt.Errorf("allow at most: reply has %d values, want 4", len(v))
	}
	allowed, ok1 := v[0].(int64)
	remaining, ok2 := v[1].(int64)
	retryS, ok3 := v[2].(string)
	resetS, ok4 := v[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("allow at most: unexpected reply %v", v)
	}
	retry, err := strconv.ParseFloat(retryS, 64)
	if err != nil {
		return nil, fmt.Errorf("allow at most: retry after: %w", err)
	}
	reset, err := strconv.ParseFloat(resetS, 64)
	if err != nil {
		return nil, fmt.Errorf("allow at most: reset after: %w", err)
	}
	return &redis_rate.Result{
		Limit:      redis_rate.Limit(l),
		Allowed:    int(allowed),
		Remaining:  int(remaining),
		RetryAfter: secondsDuration(retry),
		ResetAfter: secondsDuration(reset),
	}, nil
}

func secondsDuration(s float64) time.Duration {
	if s < 0 {
		return -1
	}
	return time.Duration(s * float64(time.Second))
}
