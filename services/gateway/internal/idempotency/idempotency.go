// Package idempotency keeps the Idempotency-Key records of the public
// endpoints that change something in Redis, with the semantics of the IETF
// draft "The Idempotency-Key HTTP Header Field":
//
//   - the same key with the same body within the retention (24 h) replays the
//     first answer (a send's 202 with the same batch id, a segment's 201 or
//     200) and does nothing again;
//   - the same key with a different body is refused (422);
//   - a duplicate that arrives while the first is still being processed is
//     refused (409).
//
// The body's fingerprint is SHA-256 of its exact bytes. A request that failed
// with a 4xx releases the key so that the client can correct it; a request
// whose publish ended in doubt (the stream may have stored the batch without
// acknowledging it) keeps its batch id, and the retry publishes that same id
// again, which JetStream de-duplicates.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decision is what to do with a request that carries a key.
type Decision int

// Decisions of Begin.
const (
	// Proceed: the key is new (or resumed after a doubtful publish); the
	// request is now in flight under it.
	Proceed Decision = iota + 1
	// Replay: the key completed with the same body; answer Record again.
	Replay
	// Busy: the first request with this key is still in flight (409).
	Busy
	// Mismatch: the key was used with a different body (422).
	Mismatch
)

// Record is the stored state of a key.
type Record struct {
	State       string `json:"s"` // in_flight, done, unknown
	Fingerprint string `json:"f"`
	Token       string `json:"t,omitempty"`
	BatchID     string `json:"b,omitempty"`
	Contacts    int    `json:"c,omitempty"`
	// Status and Body are the stored answer of an endpoint that does not
	// answer a send's 202 (Status 0: the 202 of BatchID and Contacts).
	Status int    `json:"st,omitempty"`
	Body   string `json:"bd,omitempty"`
}

// Store keeps records under a key prefix.
type Store struct {
	rdb       redis.UniversalClient
	prefix    string
	retention time.Duration
	inFlight  time.Duration
}

// New returns a store. retention is how long a completed key replays (24 h);
// inFlight bounds how long a crashed request can hold its key.
func New(rdb redis.UniversalClient, prefix string, retention, inFlight time.Duration) *Store {
	return &Store{rdb: rdb, prefix: prefix + "idem:", retention: retention, inFlight: inFlight}
}

// Fingerprint is the body's identity.
func Fingerprint(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// ValidKey reports whether a header value is acceptable: 1 to 255 visible
// ASCII characters. The draft sends it as a structured-field string
// ("..."); the quotes are removed by Normalize.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Normalize strips the structured-field quotes of a header value.
func Normalize(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// Keys are stored per company and endpoint, hashed so that any header value
// makes a safe Redis key. Unlike the rate-limit keys they carry no
// {c:<company>} hash tag: each is used alone, and a busy company's day of
// keys spread over a Redis Cluster's slots rather than filling one node.
func (s *Store) redisKey(companyID int64, route, key string) string {
	h := sha256.Sum256([]byte(key))
	return s.prefix + strconv.FormatInt(companyID, 10) + ":" + route + ":" + hex.EncodeToString(h[:16])
}

// begin claims a new key, or reports the existing record. Resuming a record
// in state "unknown" claims it again with a new token, keeping its batch id.
var begin = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {'new', ''}
end
local rec = cjson.decode(cur)
if rec.s == 'unknown' and rec.f == ARGV[3] then
  local nrec = cjson.decode(ARGV[1])
  nrec.b = rec.b
  redis.call('SET', KEYS[1], cjson.encode(nrec), 'PX', ARGV[2])
  return {'resume', cur}
end
return {'exists', cur}
`)

// Claim is a request's hold on a key.
type Claim struct {
	redisKey string
	token    string
	fp       string
	// BatchID is set when resuming a doubtful publish: publish it again.
	BatchID string
}

// Begin decides what to do with a request carrying key.
func (s *Store) Begin(ctx context.Context, companyID int64, route, key, fingerprint string) (Decision, Record, *Claim, error) {
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	c := &Claim{redisKey: s.redisKey(companyID, route, key), token: hex.EncodeToString(tok), fp: fingerprint}
	rec, _ := json.Marshal(Record{State: "in_flight", Fingerprint: fingerprint, Token: c.token})
	res, err := begin.Run(ctx, s.rdb, []string{c.redisKey}, string(rec), s.inFlight.Milliseconds(), fingerprint).StringSlice()
	if err != nil {
		return 0, Record{}, nil, fmt.Errorf("idempotency begin: %w", err)
	}
	switch res[0] {
	case "new":
		return Proceed, Record{}, c, nil
	case "resume":
		var old Record
		if err := json.Unmarshal([]byte(res[1]), &old); err != nil {
			return 0, Record{}, nil, fmt.Errorf("idempotency record: %w", err)
		}
		c.BatchID = old.BatchID
		return Proceed, old, c, nil
	}
	var cur Record
	if err := json.Unmarshal([]byte(res[1]), &cur); err != nil {
		return 0, Record{}, nil, fmt.Errorf("idempotency record: %w", err)
	}
	switch {
	case cur.Fingerprint != fingerprint:
		return Mismatch, cur, nil, nil
	case cur.State == "done":
		return Replay, cur, nil, nil
	default:
		return Busy, cur, nil, nil
	}
}

// finish replaces the record only while this claim still holds it.
var finish = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local rec = cjson.decode(cur)
if rec.t ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
`)

// Complete stores the 202 so that retries replay it.
func (s *Store) Complete(ctx context.Context, c *Claim, batchID string, contacts int) error {
	rec, _ := json.Marshal(Record{State: "done", Fingerprint: c.fp, BatchID: batchID, Contacts: contacts})
	return s.finish(ctx, c, string(rec))
}

// CompleteAnswer stores an answer other than a send's 202 (a segment's 201
// or 200) so that retries replay it.
func (s *Store) CompleteAnswer(ctx context.Context, c *Claim, status int, body []byte) error {
	rec, _ := json.Marshal(Record{State: "done", Fingerprint: c.fp, Status: status, Body: string(body)})
	return s.finish(ctx, c, string(rec))
}

// Doubt keeps the batch id of a publish that may or may not have landed, so
// that a retry publishes the same id again.
func (s *Store) Doubt(ctx context.Context, c *Claim, batchID string) error {
	rec, _ := json.Marshal(Record{State: "unknown", Fingerprint: c.fp, BatchID: batchID})
	return s.finish(ctx, c, string(rec))
}

// Release frees the key after a refusal, so the client may correct and retry.
func (s *Store) Release(ctx context.Context, c *Claim) error {
	return s.finish(ctx, c, "")
}

// finishAttempts is how many times finish tries to update a record.
const finishAttempts = 3

// finish updates the record, trying again after a failure (a Redis
// timeout, a failover) while ctx allows, each attempt with an equal share
// of what is left of it. A record left in flight would answer 409 to every
// retry of the request until it expires (the store's inFlight, a minute),
// and a completed send whose record stayed in flight would be sent again by
// a retry after that. The update only applies while this claim holds the
// record, so an attempt that did land and timed out is harmless to repeat.
func (s *Store) finish(ctx context.Context, c *Claim, value string) error {
	for attempt := 1; ; attempt++ {
		err := s.finishOnce(ctx, c, value, finishAttempts-attempt+1)
		if err == nil {
			return nil
		}
		if attempt == finishAttempts || !pause(ctx, time.Duration(attempt)*20*time.Millisecond) {
			return fmt.Errorf("idempotency finish (%d of %d attempts): %w", attempt, finishAttempts, err)
		}
	}
}

// finishOnce is one attempt of finish, with a 1/left share of what is left
// of ctx's time.
func (s *Store) finishOnce(ctx context.Context, c *Claim, value string, left int) error {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(d)/time.Duration(left))
		defer cancel()
	}
	err := finish.Run(ctx, s.rdb, []string{c.redisKey}, c.token, value, s.retention.Milliseconds()).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// pause waits for d, or reports false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
