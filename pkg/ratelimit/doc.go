// Package ratelimit holds Parley's rate limits: the Redis connection they
// share and the limiters built on it, GCRA in Redis through redis_rate.
//
// The gateway limits requests per company and endpoint with Limiter.Allow and
// a Limit from its route table (PerSecond, PerMinute, Every); Limit.String is
// the 429 text ("Rate limit exceeded: " + lim.String()) and Result.SetHeaders
// writes Retry-After and X-RateLimit-*. Dispatchers share a messaging
// account's throughput across replicas with Limiter.Take, Limiter.Wait and
// Limiter.WaitEach (the dispatchers' engine: each grant starts its sends).
//
// Keys live under RedisConfig.KeyPrefix: "<prefix>rate:req:<key>" for
// requests and "<prefix>rate:tp:<key>" for throughput. They expire on their
// own once the key is back to its full burst. Callers build keys with
// CompanyKey, whose {c:<id>} hash tag keeps a company's keys in one Redis
// Cluster slot.
//
// Redis is one server, a master found through Redis Sentinel, or a Redis
// Cluster (RedisConfig.Mode; NewRedisClient builds the client).
//
// Redis is never a reason to fail a request: every call is bounded by
// RedisConfig.Timeout (50ms by default) and, on error or timeout, answered by
// a per-process GCRA limiter with the same limit. While that lasts, limits
// hold per replica rather than across the fleet. See Limiter for the breaker,
// the logs and the metrics.
package ratelimit
