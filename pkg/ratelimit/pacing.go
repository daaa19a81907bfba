package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pacer keeps two of WhatsApp's rules in Redis, shared by every dispatcher
// replica: the pair rate (one message from a number to a user every few
// seconds) and the business portfolio's messaging limit (unique users
// reached in a moving 24 hours). Each call is one script run over one
// company's keys, which share the company's hash tag (CompanyKey), so that
// a Redis Cluster runs it on one node.
type Pacer struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewPacer returns a pacer on rdb under cfg's key prefix.
func NewPacer(rdb redis.UniversalClient, cfg RedisConfig) *Pacer {
	return &Pacer{rdb: rdb, prefix: cfg.KeyPrefix}
}

// pairScript reserves each key for ARGV[1] ms when it is free (SET NX PX)
// and answers 0, or answers the ms left of the reservation in place. A key
// given twice is taken by its first occurrence.
var pairScript = redis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, '1', 'NX', 'PX', ARGV[1]) then
    out[i] = 0
  else
    local t = redis.call('PTTL', k)
    if t < 1 then t = 1 end
    out[i] = t
  end
end
return out`)

// Pair reserves the next send from a number (its phone number id) to each
// of users, interval apart: a user free now is reserved and gets 0, one
// reserved by an earlier send gets how long until it is free.
func (p *Pacer) Pair(ctx context.Context, companyID int64, number string, users []string, interval time.Duration) ([]time.Duration, error) {
	if len(users) == 0 {
		return nil, nil
	}
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = p.prefix + CompanyKey(companyID, "pair:"+number+":"+u)
	}
	res, err := pairScript.Run(ctx, p.rdb, keys, interval.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("pair rate: %w", err)
	}
	out := make([]time.Duration, len(res))
	for i, ms := range res {
		out[i] = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}

// reachScript keeps a portfolio's users reached in a moving window as a
// sorted set scored by each user's last reach (ms). ARGV: now, window,
// limit, users. A user already in the window is reached again (free); a new
// one is admitted while the set is under the limit; past it, the k-th
// refused user of the call gets the time the k-th oldest reach leaves the
// window (when room comes for it), else 0 for admitted.
var reachScript = redis.NewScript(`
local key = KEYS[1]
local now = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - win)
local n = redis.call('ZCARD', key)
local out = {}
local refused = 0
for i = 4, #ARGV do
  local u = ARGV[i]
  if redis.call('ZSCORE', key, u) then
    redis.call('ZADD', key, now, u)
    out[#out + 1] = 0
  elseif n < limit then
    redis.call('ZADD', key, now, u)
    n = n + 1
    out[#out + 1] = 0
  else
    local e = redis.call('ZRANGE', key, refused, refused, 'WITHSCORES')
    if e[2] then out[#out + 1] = tonumber(e[2]) + win else out[#out + 1] = now + win end
    refused = refused + 1
  end
end
redis.call('PEXPIRE', key, win)
return out`)

// Reach counts users as reached by the portfolio at now, within limit
// unique users per window: for each user, the zero time when it may be
// sent now (counted), else when room for it comes.
func (p *Pacer) Reach(ctx context.Context, companyID int64, portfolio string, users []string, limit int,
	window time.Duration, now time.Time) ([]time.Time, error) {
	if len(users) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3+len(users))
	args = append(args, now.UnixMilli(), window.Milliseconds(), limit)
	for _, u := range users {
		args = append(args, u)
	}
	key := p.prefix + CompanyKey(companyID, "reach:"+portfolio)
	res, err := reachScript.Run(ctx, p.rdb, []string{key}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("messaging limit: %w", err)
	}
	out := make([]time.Time, len(res))
	for i, ms := range res {
		if ms > 0 {
			out[i] = time.UnixMilli(ms)
		}
	}
	return out, nil
}

// Reached is how many unique users the portfolio reached in the window
// ending at now.
func (p *Pacer) Reached(ctx context.Context, companyID int64, portfolio string, window time.Duration, now time.Time) (int64, error) {
	key := p.prefix + CompanyKey(companyID, "reach:"+portfolio)
	n, err := p.rdb.ZCount(ctx, key, strconv.FormatInt(now.Add(-window).UnixMilli()+1, 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("messaging limit: %w", err)
	}
	return n, nil
}

// PauseMarketing stops the number's marketing sends for d (131048, the
// spam rate limit), for every replica; a longer pause in place stays.
func (p *Pacer) PauseMarketing(ctx context.Context, companyID int64, number string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	key := p.prefix + CompanyKey(companyID, "marketing-pause:"+number)
	if err := p.rdb.SetArgs(ctx, key, "1", redis.SetArgs{TTL: d, Mode: "NX"}).Err(); err != nil && err != redis.Nil {
		return fmt.Errorf("pause marketing: %w", err)
	}
	if err := p.rdb.Do(ctx, "PEXPIRE", key, d.Milliseconds(), "GT").Err(); err != nil {
		return fmt.Errorf("pause marketing: %w", err)
	}
	return nil
}

// MarketingPausedFor is how long the number's marketing pause lasts yet,
// 0 when none.
func (p *Pacer) MarketingPausedFor(ctx context.Context, companyID int64, number string) (time.Duration, error) {
	key := p.prefix + CompanyKey(companyID, "marketing-pause:"+number)
	d, err := p.rdb.PTTL(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("marketing pause: %w", err)
	}
	if d < 0 {
		return 0, nil
	}
	return d, nil
}

// Once is true for the first caller of the fleet to ask for name within
// ttl (SET NX PX): one process of many runs a periodic job.
func (p *Pacer) Once(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ok, err := p.rdb.SetNX(ctx, p.prefix+"once:"+name, "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("once %s: %w", name, err)
	}
	return ok, nil
}
