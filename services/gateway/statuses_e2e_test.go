package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/services/gateway/internal/config"
	"github.com/parleyhq/parley/testkit/storetest"
)

// The group commit of status callbacks (package statuses) through the
// real gateway, its HTTP edge and the record on a fresh database.

// statusWait makes the gateway's groups wait d for more webhooks.
func statusWait(d time.Duration) gwOptions {
	return gwOptions{configure: func(c *config.Config) { c.StatusGroupWait = d }}
}

// sentMessages records n messages of tn as sent, with wamids
// "wamid.<i>", and subscribes tn to every event.
func (g *gw) sentMessages(tn tenant, n int) {
	g.t.Helper()
	ctx := context.Background()
	if _, err := g.pool.Exec(ctx, `
		WITH b AS (
			INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, accepted_at, status)
			VALUES (gen_random_uuid(), $1, 'campaign', 'test', $2, $3, now(), 'completed') RETURNING id, accepted_at)
		INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state, provider_message_id,
			sent_at, created_at)
		SELECT b.id, i, $1, '+39333' || lpad(i::text, 7, '0'), $4, $5, 'sent', 'wamid.' || i, now(), b.accepted_at
		FROM b, generate_series(0, $3 - 1) i`, tn.company.ID, tn.campaign.ID, n, tn.account.ID, tn.template.ID); err != nil {
		g.t.Fatal(err)
	}
	storetest.Subscribe(g.t, g.pool, tn.company.ID)
}

// status is one status of message i at the Cloud API's time at (seconds).
type status struct {
	i      int
	status string
	at     int64
}

// statusWebhook posts one signed webhook of statuses, as the Cloud API
// words them.
func (g *gw) statusWebhook(tn tenant, sts ...status) response {
	g.t.Helper()
	var v whatsapp.WebhookValue
	v.MessagingProduct, v.Metadata.PhoneNumberID = "whatsapp", tn.account.PhoneNumberID
	for _, s := range sts {
		v.Statuses = append(v.Statuses, whatsapp.WebhookStatus{ID: "wamid." + strconv.Itoa(s.i), Status: s.status,
			Timestamp: strconv.FormatInt(s.at, 10), RecipientID: "39333" + fmt.Sprintf("%07d", s.i)})
	}
	body, err := json.Marshal(whatsapp.WebhookPayload{Object: whatsapp.WebhookObject, Entry: []whatsapp.WebhookEntry{{
		ID: "1", Changes: []whatsapp.WebhookChange{{Field: "messages", Value: v}}}}})
	if err != nil {
		g.t.Fatal(err)
	}
	return g.do("POST", "/webhooks/whatsapp", "", body, whatsapp.SignatureHeader, whatsapp.Sign(testAppSecret, body))
}

// webhooksAtOnce posts each webhook from its own goroutine, all at once,
// and returns the answers' statuses.
func (g *gw) webhooksAtOnce(tn tenant, posts [][]status) []int {
	codes := make([]int, len(posts))
	var wg sync.WaitGroup
	for i, p := range posts {
		wg.Go(func() { codes[i] = g.statusWebhook(tn, p...).status })
	}
	wg.Wait()
	return codes
}

// statusGroups reads parley_gateway_status_groups_total by outcome.
func (g *gw) statusGroups() map[string]float64 {
	g.t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(g.do("GET", "/metrics", "", nil).body))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `parley_gateway_status_groups_total{outcome="`)
		if !ok {
			continue
		}
		outcome, v, _ := strings.Cut(rest, `"} `)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			g.t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		out[outcome] = f
	}
	return out
}

// messageStates counts the messages of the record by state.
func (g *gw) messageStates() map[string]int {
	g.t.Helper()
	rows, err := g.pool.Query(context.Background(), `SELECT state::text, count(*) FROM messages GROUP BY 1`)
	if err != nil {
		g.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			g.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// TestStatusWebhooksShareTransactions: webhooks arriving together are
// applied in fewer transactions than webhooks, each answered 200 once its
// group is committed.
func TestStatusWebhooksShareTransactions(t *testing.T) {
	g := newGateway(t, statusWait(100*time.Millisecond))
	tn := g.provision("grouped")
	g.sentMessages(tn, 200)
	at := time.Now().Unix()
	var posts [][]status
	for p := range 40 {
		var sts []status
		for i := p * 5; i < p*5+5; i++ {
			sts = append(sts, status{i, "delivered", at}, status{i, "read", at + 1})
		}
		posts = append(posts, sts)
	}
	for i, code := range g.webhooksAtOnce(tn, posts) {
		if code != 200 {
			t.Errorf("webhook %d: %d, want 200", i, code)
		}
	}
	groups := g.statusGroups()
	if groups["committed"] < 1 || groups["committed"] > 20 || groups["failed"] != 0 {
		t.Errorf("groups %v: want the 40 webhooks in at most 20 committed transactions", groups)
	}
	if st := g.messageStates(); st["read"] != 200 {
		t.Errorf("states %v, want 200 read", st)
	}
	t.Logf("40 webhooks of 10 statuses in %v groups", groups["committed"])
}

// TestStatusWebhooksFailedGroup: when the record refuses a group, every
// webhook in it is answered 503 and none of its statuses is applied; the
// provider's retries are applied.
func TestStatusWebhooksFailedGroup(t *testing.T) {
	g := newGateway(t, statusWait(300*time.Millisecond))
	tn := g.provision("refused")
	g.sentMessages(tn, 30)
	if _, err := g.pool.Exec(context.Background(), `
		CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'test: refused'; END $$;
		CREATE TRIGGER test_refuse BEFORE UPDATE ON messages
			FOR EACH ROW WHEN (NEW.provider_message_id = 'wamid.12') EXECUTE FUNCTION test_refuse();`); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Unix()
	posts := [][]status{{{0, "delivered", at}, {1, "delivered", at}}, {{11, "delivered", at}, {12, "delivered", at}},
		{{20, "read", at}, {21, "read", at}}}
	for i, code := range g.webhooksAtOnce(tn, posts) {
		if code != 503 {
			t.Errorf("webhook %d of a failed group: %d, want 503", i, code)
		}
	}
	if groups := g.statusGroups(); groups["failed"] != 1 || groups["committed"] != 0 {
		t.Errorf("groups %v, want one failed", groups)
	}
	if st := g.messageStates(); st["sent"] != 30 {
		t.Errorf("states %v after a failed group, want 30 sent", st)
	}
	if _, err := g.pool.Exec(context.Background(), `DROP TRIGGER test_refuse ON messages`); err != nil {
		t.Fatal(err)
	}
	for i, code := range g.webhooksAtOnce(tn, posts) {
		if code != 200 {
			t.Errorf("retry of webhook %d: %d, want 200", i, code)
		}
	}
	if st := g.messageStates(); st["delivered"] != 4 || st["read"] != 2 {
		t.Errorf("states %v after the retries, want 4 delivered and 2 read", st)
	}
}

// TestStatusWebhooksOrderAndDuplicates: a read before its delivered (in
// separate webhooks, so separate groups) ends read with its delivered
// time; a webhook posted twice, and a status twice in one webhook, change
// nothing more; every message gets one message.delivered and one
// message.read event.
func TestStatusWebhooksOrderAndDuplicates(t *testing.T) {
	g := newGateway(t, gwOptions{})
	tn := g.provision("order")
	g.sentMessages(tn, 4)
	at := time.Now().Add(-time.Minute).Unix()
	for _, p := range [][]status{
		{{0, "read", at + 2}}, {{0, "delivered", at + 1}}, // read first
		{{1, "delivered", at + 1}}, {{1, "read", at + 2}}, // in order
		{{2, "delivered", at + 1}, {2, "read", at + 2}, {2, "delivered", at + 1}}, // together, one twice
		{{3, "delivered", at + 1}}, {{3, "delivered", at + 1}}, {{3, "read", at + 2}}, {{3, "read", at + 2}}, // each twice
	} {
		if r := g.statusWebhook(tn, p...); r.status != 200 {
			t.Fatalf("webhook %v: %d %s", p, r.status, r.body)
		}
	}
	rows, err := g.pool.Query(context.Background(), `SELECT provider_message_id, state::text, delivered_at, read_at FROM messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var wamid, state string
		var delivered, read *time.Time
		if err := rows.Scan(&wamid, &state, &delivered, &read); err != nil {
			t.Fatal(err)
		}
		if state != "read" || delivered == nil || read == nil || delivered.After(*read) || read.Unix() != at+2 {
			t.Errorf("%s: %s, delivered %v, read %v; want read at %d, delivered no later", wamid, state, delivered, read, at+2)
		}
	}
	evs, err := g.pool.Query(context.Background(), `SELECT type, data->>'provider_message_id' FROM event_outbox WHERE type LIKE 'message.%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	got := map[string][]string{}
	for evs.Next() {
		var typ, wamid string
		if err := evs.Scan(&typ, &wamid); err != nil {
			t.Fatal(err)
		}
		got[wamid] = append(got[wamid], typ)
	}
	for i := range 4 {
		w := "wamid." + strconv.Itoa(i)
		if e := got[w]; len(e) != 2 || e[0] != "message.delivered" || e[1] != "message.read" {
			t.Errorf("%s: events %v, want message.delivered then message.read", w, e)
		}
	}
}

// TestStatusWebhooksDrainAtStop: webhooks waiting for their group when the
// gateway is stopped are committed and answered 200 before it exits.
func TestStatusWebhooksDrainAtStop(t *testing.T) {
	g := newGateway(t, statusWait(time.Second))
	tn := g.provision("drain")
	g.sentMessages(tn, 10)
	at := time.Now().Unix()
	var posts [][]status
	for i := range 10 {
		posts = append(posts, []status{{i, "read", at}})
	}
	codes := make(chan []int, 1)
	go func() { codes <- g.webhooksAtOnce(tn, posts) }()
	time.Sleep(300 * time.Millisecond) // queued, their group not applied yet
	g.stopApp()
	g.stopApp = nil
	for i, code := range <-codes {
		if code != 200 {
			t.Errorf("webhook %d at the stop: %d, want 200", i, code)
		}
	}
	if st := g.messageStates(); st["read"] != 10 {
		t.Errorf("states %v, want 10 read", st)
	}
}
