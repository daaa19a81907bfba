package idempotency_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
)

func newStore(t *testing.T, hooks ...redis.Hook) *idempotency.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	return idempotency.New(rdb, prefix, time.Hour, time.Minute)
}

func TestIdempotencyDecisions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	fp := idempotency.Fingerprint([]byte(`{"a":1}`))
	other := idempotency.Fingerprint([]byte(`{"a":2}`))

	d, _, claim, err := s.Begin(ctx, 1, "campaigns_send", "k1", fp)
	if err != nil || d != idempotency.Proceed || claim == nil || claim.BatchID != "" {
		t.Fatalf("first: %v %v %+v", d, err, claim)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "campaigns_send", "k1", fp); d != idempotency.Busy {
		t.Fatalf("duplicate in flight: %v, want Busy", d)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "campaigns_send", "k1", other); d != idempotency.Mismatch {
		t.Fatalf("other body in flight: %v, want Mismatch", d)
	}
	if err := s.Complete(ctx, claim, "b-1", 3); err != nil {
		t.Fatal(err)
	}
	d, rec, _, _ := s.Begin(ctx, 1, "campaigns_send", "k1", fp)
	if d != idempotency.Replay || rec.BatchID != "b-1" || rec.Contacts != 3 {
		t.Fatalf("after complete: %v %+v", d, rec)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "campaigns_send", "k1", other); d != idempotency.Mismatch {
		t.Fatalf("other body after complete: %v", d)
	}
	// Keys are per company and per endpoint.
	if d, _, _, _ := s.Begin(ctx, 2, "campaigns_send", "k1", fp); d != idempotency.Proceed {
		t.Fatalf("another company: %v", d)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "automations_send", "k1", fp); d != idempotency.Proceed {
		t.Fatalf("another endpoint: %v", d)
	}
}

func TestReleaseAndDoubt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	fp := idempotency.Fingerprint([]byte(`x`))

	_, _, c1, _ := s.Begin(ctx, 1, "r", "k", fp)
	if err := s.Release(ctx, c1); err != nil {
		t.Fatal(err)
	}
	d, _, c2, _ := s.Begin(ctx, 1, "r", "k", fp)
	if d != idempotency.Proceed {
		t.Fatalf("after release: %v", d)
	}
	// A stale claim cannot settle a key another request now holds.
	if err := s.Complete(ctx, c1, "stale", 1); err != nil {
		t.Fatal(err)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "r", "k", fp); d != idempotency.Busy {
		t.Fatalf("stale claim overwrote the record: %v", d)
	}
	// A doubtful publish keeps its batch id for the retry.
	if err := s.Doubt(ctx, c2, "b-doubt"); err != nil {
		t.Fatal(err)
	}
	d, _, c3, _ := s.Begin(ctx, 1, "r", "k", fp)
	if d != idempotency.Proceed || c3.BatchID != "b-doubt" {
		t.Fatalf("resume after doubt: %v %+v", d, c3)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "r", "k", idempotency.Fingerprint([]byte("y"))); d != idempotency.Mismatch {
		t.Fatalf("other body after doubt: %v", d)
	}
}

func TestKeyRules(t *testing.T) {
	if idempotency.Normalize(`"abc"`) != "abc" || idempotency.Normalize("abc") != "abc" {
		t.Fatal("Normalize")
	}
	for k, ok := range map[string]bool{"": false, "a": true, "with space": false, "é": false, string(make([]byte, 256)): false} {
		if idempotency.ValidKey(k) != ok {
			t.Errorf("ValidKey(%q) != %v", k, ok)
		}
	}
}

func TestCompleteAnswerReplaysIt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	fp := idempotency.Fingerprint([]byte(`{"name":"VIP"}`))
	d, _, claim, err := s.Begin(ctx, 1, "segments_create", "k", fp)
	if err != nil || d != idempotency.Proceed {
		t.Fatal(d, err)
	}
	body := []byte(`{"id":7,"name":"VIP","contacts":0,"created_at":"2030-01-02T03:04:05Z"}`)
	if err := s.CompleteAnswer(ctx, claim, 201, body); err != nil {
		t.Fatal(err)
	}
	d, rec, _, err := s.Begin(ctx, 1, "segments_create", "k", fp)
	if err != nil || d != idempotency.Replay || rec.Status != 201 || rec.Body != string(body) || rec.BatchID != "" {
		t.Fatalf("replay: %v %+v %v", d, rec, err)
	}
}

// failScripts fails the next n scripts run through the client (Begin and
// the record updates are scripts) as a Redis timeout would, without
// sending them.
type failScripts struct{ n atomic.Int32 }

func (f *failScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f *failScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && f.n.Add(-1) >= 0 {
			err := fmt.Errorf("i/o timeout (injected)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestFinishRetriesAFailedUpdate: a record update that fails (a Redis
// timeout) is tried again, so that the key does not stay in flight (a
// minute of 409s, then a retry that sends again); after three failed
// attempts the error is returned and the key is still in flight.
func TestFinishRetriesAFailedUpdate(t *testing.T) {
	ctx := context.Background()
	f := &failScripts{}
	s := newStore(t, f)
	fp := idempotency.Fingerprint([]byte(`{"a":1}`))
	tctx := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}

	_, _, claim, err := s.Begin(ctx, 1, "campaigns_send", "k1", fp)
	if err != nil {
		t.Fatal(err)
	}
	f.n.Store(2) // the first two attempts fail
	if err := s.Complete(tctx(), claim, "b-1", 3); err != nil {
		t.Fatalf("complete after two failed attempts: %v", err)
	}
	if d, rec, _, _ := s.Begin(ctx, 1, "campaigns_send", "k1", fp); d != idempotency.Replay || rec.BatchID != "b-1" {
		t.Fatalf("after the retried complete: %v %+v, want Replay of b-1", d, rec)
	}

	_, _, claim, err = s.Begin(ctx, 1, "campaigns_send", "k2", fp)
	if err != nil {
		t.Fatal(err)
	}
	f.n.Store(2)
	if err := s.Release(tctx(), claim); err != nil {
		t.Fatalf("release after two failed attempts: %v", err)
	}
	if d, _, _, _ := s.Begin(ctx, 1, "campaigns_send", "k2", fp); d != idempotency.Proceed {
		t.Fatalf("after the retried release: %v, want Proceed", d)
	}

	_, _, claim, err = s.Begin(ctx, 1, "campaigns_send", "k3", fp)
	if err != nil {
		t.Fatal(err)
	}
	f.n.Store(3)
	if err := s.Doubt(tctx(), claim, "b-3"); err == nil {
		t.Fatal("doubt with every attempt failing: no error")
	}
	f.n.Store(0)
	if d, _, _, _ := s.Begin(ctx, 1, "campaigns_send", "k3", fp); d != idempotency.Busy {
		t.Fatalf("after three failed attempts: %v, want Busy (still in flight)", d)
	}
}
