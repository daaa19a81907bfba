package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/testkit/storetest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T, cfg webhooks.Config) (*webhooks.Store, *pgxpool.Pool, int64, *clock) {
	t.Helper()
	_, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	var company int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	return webhooks.NewStore(pool, box, cfg).WithClock(c.Now).WithResolver(dns), pool, company, c
}

func TestEndpointLifecycle(t *testing.T) {
	ctx := context.Background()
	s, pool, company, clk := newStore(t, webhooks.DefaultConfig())

	secret, ep, err := s.Create(ctx, company, webhooks.Input{URL: "https://hooks.example.com/a", Description: " CRM ",
		EventTypes: []string{"message.failed", "batch.completed", "message.failed"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "whsec_") || ep.SecretHint != secret[len(secret)-4:] {
		t.Fatalf("secret %q, hint %q", secret, ep.SecretHint)
	}
	if ep.Description != "CRM" || !ep.Enabled || strings.Join(ep.EventTypes, ",") != "message.failed,batch.completed" {
		t.Fatalf("endpoint = %+v", ep)
	}
	if !ep.Wants("message.failed") || ep.Wants("message.sent") {
		t.Fatal("Wants does not follow the filter")
	}
	// The secret is stored sealed, never in clear.
	var sealed []byte
	if err := pool.QueryRow(ctx, `SELECT sealed FROM webhook_secrets WHERE endpoint_id = $1`, ep.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), secret) || strings.Contains(string(sealed), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the secret is stored in clear")
	}
	keys, err := s.ActiveSecrets(ctx, ep.ID, clk.Now())
	if err != nil || len(keys) != 1 {
		t.Fatalf("ActiveSecrets = %d, %v", len(keys), err)
	}
	want, _ := webhooks.ParseSecret(secret)
	if string(keys[0]) != string(want) {
		t.Fatal("ActiveSecrets does not return the created secret's key")
	}

	// Rotation: both sign for 24 hours, then only the new one.
	clk.Add(time.Hour)
	rotated, ep2, err := s.RotateSecret(ctx, company, ep.ID)
	if err != nil || rotated == secret || ep2.SecretHint != rotated[len(rotated)-4:] {
		t.Fatalf("RotateSecret = %q, %+v, %v", rotated, ep2, err)
	}
	newKey, _ := webhooks.ParseSecret(rotated)
	keys, _ = s.ActiveSecrets(ctx, ep.ID, clk.Now().Add(webhooks.RotationOverlap-time.Second))
	if len(keys) != 2 || string(keys[0]) != string(newKey) || string(keys[1]) != string(want) {
		t.Fatalf("within the overlap: %d keys, want the new then the old", len(keys))
	}
	keys, _ = s.ActiveSecrets(ctx, ep.ID, clk.Now().Add(webhooks.RotationOverlap))
	if len(keys) != 1 || string(keys[0]) != string(newKey) {
		t.Fatalf("after the overlap: %d keys, want the new one only", len(keys))
	}

	// Update: only the fields given change; bad input changes nothing.
	desc := "Shop"
	all := []string{}
	ep3, err := s.Update(ctx, company, ep.ID, webhooks.Patch{Description: &desc, EventTypes: &all})
	if err != nil || ep3.Description != "Shop" || len(ep3.EventTypes) != 0 || ep3.URL != ep.URL || !ep3.Wants("message.sent") {
		t.Fatalf("Update = %+v, %v", ep3, err)
	}
	bad := "http://hooks.example.com/"
	badTypes := []string{"message.exploded"}
	_, err = s.Update(ctx, company, ep.ID, webhooks.Patch{URL: &bad, EventTypes: &badTypes, Description: &desc})
	var ve *webhooks.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 2 || ve.Fields[0].Field != "url" || ve.Fields[1].Field != "event_types" {
		t.Fatalf("bad update = %v", err)
	}
	if got, _ := s.Get(ctx, company, ep.ID); got.URL != ep.URL || len(got.EventTypes) != 0 {
		t.Fatalf("a refused update changed the endpoint: %+v", got)
	}

	// Disabled by the sender, re-enabled by an admin.
	if err := s.Disable(ctx, ep.ID, "failing for 3 days", "HTTP 500: boom"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, company, ep.ID); got.Enabled || got.DisabledReason != "failing for 3 days" || got.LastError != "HTTP 500: boom" || got.DisabledAt == nil {
		t.Fatalf("disabled = %+v", got)
	}
	if subs, _ := s.Subscribers(ctx, company, "message.sent"); len(subs) != 0 {
		t.Fatal("a disabled endpoint is a subscriber")
	}
	if _, err := s.SendTest(ctx, company, ep.ID, ""); !errors.Is(err, webhooks.ErrDisabled) {
		t.Fatalf("test event to a disabled endpoint = %v", err)
	}
	got, err := s.Enable(ctx, company, ep.ID)
	if err != nil || !got.Enabled || got.DisabledReason != "" || got.DisabledAt != nil {
		t.Fatalf("Enable = %+v, %v", got, err)
	}
	if subs, _ := s.Subscribers(ctx, company, "message.sent"); len(subs) != 1 {
		t.Fatal("an enabled endpoint with no filter is not a subscriber")
	}

	// Another company sees none of it.
	var other int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('globex', 'Globex') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, other, ep.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("Get from another company = %v", err)
	}
	if err := s.Delete(ctx, other, ep.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("Delete from another company = %v", err)
	}
	if _, _, err := s.RotateSecret(ctx, other, ep.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("RotateSecret from another company = %v", err)
	}
	if _, err := s.Get(ctx, company, "not-a-uuid"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("Get(not-a-uuid) = %v", err)
	}
	if _, err := s.List(ctx, 999999); !errors.Is(err, webhooks.ErrCompanyNotFound) {
		t.Fatalf("List of a missing company = %v", err)
	}

	if err := s.Delete(ctx, company, ep.ID); err != nil {
		t.Fatal(err)
	}
	if eps, _ := s.List(ctx, company); len(eps) != 0 {
		t.Fatalf("%d endpoints after delete", len(eps))
	}
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM webhook_secrets`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d secrets left after delete", n)
	}
}

func TestCreateRefusesBadInputAndEnforcesTheLimit(t *testing.T) {
	ctx := context.Background()
	cfg := webhooks.DefaultConfig()
	cfg.MaxEndpoints = 2
	s, pool, company, _ := newStore(t, cfg)

	_, _, err := s.Create(ctx, company, webhooks.Input{URL: "https://metadata.example.com/", EventTypes: []string{"nope"},
		Description: strings.Repeat("x", 501)})
	var ve *webhooks.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 3 {
		t.Fatalf("Create with three bad fields = %v", err)
	}
	if _, _, err := s.Create(ctx, 999999, webhooks.Input{URL: "https://hooks.example.com/"}); !errors.Is(err, webhooks.ErrCompanyNotFound) {
		t.Fatalf("Create for a missing company = %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := s.Create(ctx, company, webhooks.Input{URL: "https://hooks.example.com/"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Create(ctx, company, webhooks.Input{URL: "https://hooks.example.com/"}); !errors.Is(err, webhooks.ErrTooManyEndpoints) {
		t.Fatalf("third Create = %v", err)
	}
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints`).Scan(&n)
	if n != 2 {
		t.Fatalf("%d endpoints, want 2", n)
	}
}

func TestTestEventAttemptsReplayAndRetention(t *testing.T) {
	ctx := context.Background()
	s, pool, company, clk := newStore(t, webhooks.DefaultConfig())
	// The weeks from the clock's on, as the sender makes them (the test
	// database has those of the real week it was made in).
	if _, err := pool.Exec(ctx, `DROP TABLE webhook_attempts_legacy, webhook_deliveries_legacy`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeepDeliveries(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	_, ep, err := s.Create(ctx, company, webhooks.Input{URL: "https://hooks.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendTest(ctx, company, ep.ID, "message.exploded"); err == nil {
		t.Fatal("a test event of an unknown type was queued")
	}
	d, err := s.SendTest(ctx, company, ep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != webhooks.StatusPending || d.EventType != "webhook.test" || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(clk.Now()) {
		t.Fatalf("test delivery = %+v", d)
	}
	var body webhooks.Body
	if err := json.Unmarshal(d.Payload, &body); err != nil || body.Type != "webhook.test" || !body.Timestamp.Equal(clk.Now()) {
		t.Fatalf("payload %s: %v", d.Payload, err)
	}
	failed, err := s.SendTest(ctx, company, ep.ID, "message.failed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(failed.Payload), `"code": 131026`) {
		t.Fatalf("message.failed sample = %s", failed.Payload)
	}

	// The first succeeds; the second fails, is retried, then given up.
	code200, code500 := 200, 500
	if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: d.ID, Succeeded: true, ResponseCode: &code200,
		Latency: 12 * time.Millisecond, Excerpt: "ok", At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	retry := clk.Now().Add(time.Minute)
	if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: failed.ID, ResponseCode: &code500, Latency: 30 * time.Millisecond,
		Excerpt: strings.Repeat("é", 1000), At: clk.Now(), NextAttemptAt: &retry}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: failed.ID, Error: "dial tcp: connection refused", At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	page, next, err := s.Attempts(ctx, company, ep.ID, 0, 2)
	if err != nil || len(page) != 2 || next == 0 {
		t.Fatalf("first page: %d attempts, next %d, %v", len(page), next, err)
	}
	if page[0].Error != "dial tcp: connection refused" || page[1].ResponseCode == nil || *page[1].ResponseCode != 500 ||
		len(page[1].Excerpt) > webhooks.ExcerptLength || page[1].LatencyMS != 30 {
		t.Fatalf("attempts = %+v", page)
	}
	rest, next, err := s.Attempts(ctx, company, ep.ID, next, 2)
	if err != nil || len(rest) != 1 || next != 0 || rest[0].Status != webhooks.StatusSucceeded {
		t.Fatalf("second page: %+v, next %d, %v", rest, next, err)
	}
	got, _ := s.Get(ctx, company, ep.ID)
	if got.LastError != "dial tcp: connection refused" || got.FailingSince == nil {
		t.Fatalf("endpoint after failures = %+v", got)
	}

	// Replay: only failed deliveries of the range go back to pending.
	clk.Add(time.Hour)
	if _, err := s.ReplayFailed(ctx, company, ep.ID, clk.Now(), clk.Now().Add(-time.Hour)); err == nil {
		t.Fatal("a backwards range was accepted")
	}
	n, err := s.ReplayFailed(ctx, company, ep.ID, clk.Now().Add(-3*time.Hour), clk.Now().Add(-2*time.Hour))
	if err != nil || n != 0 {
		t.Fatalf("replay of an empty range = %d, %v", n, err)
	}
	n, err = s.ReplayFailed(ctx, company, ep.ID, clk.Now().Add(-2*time.Hour), clk.Now())
	if err != nil || n != 1 {
		t.Fatalf("replay = %d, %v", n, err)
	}
	ds, _ := s.Deliveries(ctx, company, ep.ID, webhooks.StatusPending, 10)
	if len(ds) != 1 || ds[0].ID != failed.ID || ds[0].Attempts != 0 || !ds[0].NextAttemptAt.Equal(clk.Now()) || !ds[0].QueuedAt.Equal(clk.Now()) {
		t.Fatalf("pending after replay = %+v", ds)
	}

	// Retention, by whole weeks: these deliveries' week (from Monday 23
	// November) goes once its end is older than the retention, with its
	// attempts, and not while one of its deliveries is pending (the one
	// replayed): until then it keeps them all.
	retention := webhooks.DefaultConfig().AttemptRetention
	end := store.Week(d.CreatedAt).AddDate(0, 0, 7)
	week := "webhook_deliveries_w" + store.Week(d.CreatedAt).Format("20060102")
	rows := func() (attempts, deliveries int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_attempts), (SELECT count(*) FROM webhook_deliveries)`).
			Scan(&attempts, &deliveries); err != nil {
			t.Fatal(err)
		}
		return attempts, deliveries
	}
	clk.Add(end.Add(retention - time.Minute).Sub(clk.Now()))
	k, err := s.KeepDeliveries(ctx, clk.Now())
	if err != nil || slices.Contains(k.Dropped, week) || slices.Contains(k.Open, week) {
		t.Fatalf("a minute before the week's end is the retention old: %+v (%v); want its week untouched", k, err)
	}
	clk.Add(time.Minute)
	k, err = s.KeepDeliveries(ctx, clk.Now())
	if err != nil || slices.Contains(k.Dropped, week) || !slices.Equal(k.Open, []string{week}) {
		t.Fatalf("with a delivery pending: %+v (%v); want %s kept open", k, err, week)
	}
	if attempts, deliveries := rows(); attempts != 3 || deliveries != 2 {
		t.Fatalf("with a delivery pending: %d attempts, %d deliveries (want the week whole: 3 and 2)", attempts, deliveries)
	}
	if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: failed.ID, Succeeded: true, ResponseCode: &code200, At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	k, err = s.KeepDeliveries(ctx, clk.Now())
	if err != nil || !slices.Contains(k.Dropped, week) || len(k.Open) != 0 {
		t.Fatalf("once nothing is pending: %+v (%v); want %s dropped", k, err, week)
	}
	if attempts, deliveries := rows(); attempts != 0 || deliveries != 0 {
		t.Fatalf("after the week went: %d attempts, %d deliveries (want 0 and 0)", attempts, deliveries)
	}
	parts, err := store.Partitions(ctx, pool, "webhook_attempts")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Name == "webhook_attempts_w"+store.Week(d.CreatedAt).Format("20060102") {
			t.Fatalf("%s is left after its deliveries' week went", p.Name)
		}
	}
}
