//go:build drill

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/segments"
	"github.com/parleyhq/parley/testkit/drilltally"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestDrillSegment50k sends a campaign to a segment of 50,000 contacts
// through the real gateway, the campaign dispatcher's engine (pkg/delivery,
// as the binary runs it, with its default tuning) and the provider
// simulator, and prints how long it took from the 202 to the provider's
// last receipt. Every contact must receive exactly one message.
//
//	make drill-segment-50k
//	PARLEY_DRILL_CONTACTS=20000 PARLEY_DRILL_THROUGHPUT=1000 PARLEY_DRILL_LATENCY_MS=100 make drill-segment-50k
func TestDrillSegment50k(t *testing.T) {
	n := envInt(t, "PARLEY_DRILL_CONTACTS", 50_000)
	perSecond := envInt(t, "PARLEY_DRILL_THROUGHPUT", 2000)
	latency := time.Duration(envInt(t, "PARLEY_DRILL_LATENCY_MS", 50)) * time.Millisecond
	ctx := context.Background()
	g := newGateway(t, gwOptions{})
	co := g.provision("drill")

	// The account's throughput raised, on the simulator and in Parley.
	if _, err := g.cat.UpdateMessagingAccount(ctx, co.account.ID, catalog.AccountUpdate{ThroughputPerSecond: &perSecond}); err != nil {
		t.Fatal(err)
	}
	sim, err := whatsappsim.New(whatsappsim.Config{Throughput: perSecond, MaxRecipients: n + 1000,
		Faults: whatsappsim.Faults{Latency: latency, Jitter: latency / 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetAccount(whatsappsim.Account{PhoneNumberID: co.account.PhoneNumberID, Token: "tok", ThroughputPerSecond: perSecond}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	startCampaignDispatcher(t, g, srv.URL)

	// The segment: its first 1000 contacts through the API, the rest through
	// the same store the endpoint uses (the API takes 1000 per minute).
	setupStart := time.Now()
	phoneOf := func(i int) string { return fmt.Sprintf("+3934%08d", i) }
	chunk := func(from, to int) []contacts.Upsert {
		out := make([]contacts.Upsert, 0, to-from)
		for i := from; i < to; i++ {
			first := "C" + strconv.Itoa(i)
			out = append(out, contacts.Upsert{Phone: phoneOf(i), FirstName: &first, Variables: map[string]string{"order_id": "O-" + strconv.Itoa(i)}})
		}
		return out
	}
	first := min(n, 1000)
	body := `{"name":"drill","contacts":[`
	for i := range first {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"phone":%q,"first_name":"C%d","variables":{"order_id":"O-%d"}}`, phoneOf(i), i, i)
	}
	r := g.post("/api/segments/create", co.key, body+"]}")
	if r.status != 201 {
		t.Fatalf("create segment: %d %s", r.status, r.body)
	}
	segID := int64(r.json(t)["id"].(float64))
	store := segments.NewStore(g.pool, nil)
	for from := first; from < n; from += 1000 {
		if _, err := store.AddContacts(ctx, co.company.ID, segID, chunk(from, min(n, from+1000))); err != nil {
			t.Fatal(err)
		}
	}
	setup := time.Since(setupStart)

	// The send.
	sent := time.Now()
	r = g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, segID))
	accepted := time.Now()
	if r.status != 202 || r.json(t)["contacts"] != float64(n) {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	batchID := r.json(t)["batch_id"].(string)

	var expanded, lastReceipt time.Time
	deadline := accepted.Add(time.Duration(n/50+120) * time.Second)
	for {
		now := time.Now()
		if expanded.IsZero() {
			var status string
			if err := g.pool.QueryRow(ctx, `SELECT status::text FROM batches WHERE id = $1`, batchID).Scan(&status); err == nil && status != "accepted" {
				expanded = now
			}
		}
		if st := sim.Stats(); st.Accepted >= int64(n) {
			lastReceipt = now
			break
		}
		if now.After(deadline) {
			t.Fatalf("after %s the provider has %d of %d messages", now.Sub(accepted), sim.Stats().Accepted, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var completed time.Time
	for {
		res := g.do(http.MethodGet, "/api/batches/"+batchID, co.key, nil)
		if res.status == 200 && res.json(t)["status"] == "completed" {
			completed = time.Now()
			c := res.json(t)["counts"].(map[string]any)
			if c["sent"] != float64(n) {
				t.Fatalf("batch counts %v, want %d sent", c, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch not completed: %s", res.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := sim.Stats()
	// Counted per recipient at the provider (as every drill does): each
	// member's phone received once, nothing failed, nothing else sent.
	members := make([]string, n)
	for i := range members {
		members[i] = phoneOf(i)
	}
	tl, err := drilltally.Take(ctx, drilltally.Sim{URL: srv.URL}, g.pool, members)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tl.Problems(drilltally.Expect{}) {
		t.Errorf("segment drill: %s", p)
	}
	if t.Failed() {
		t.FailNow()
	}
	// Personalised from the saved contacts.
	if got := sim.Messages(whatsappsim.Filter{To: phoneOf(n - 1)[1:], Limit: 1}); len(got) != 1 || bodyOf(got[0]) != fmt.Sprintf("C%d|O-%d", n-1, n-1) {
		t.Fatalf("last contact's message: %+v", got)
	}
	sending := lastReceipt.Sub(accepted)
	fmt.Printf(`
segment drill: %d contacts, account throughput %d/s, provider latency %s (+ up to %s jitter)
  segment built in            %s (1000 through the API, the rest through the same store)
  202 answered in             %s
  202 -> expanded             %s (status left "accepted")
  202 -> last provider receipt %s  (%.0f messages/s over the whole send)
  202 -> batch "completed"    %s
  provider: %d accepted, %d distinct recipients, %d duplicates, %d throttled (130429)
`, n, perSecond, latency, latency/2, setup.Round(time.Millisecond), accepted.Sub(sent).Round(time.Millisecond),
		expanded.Sub(accepted).Round(time.Millisecond), sending.Round(time.Millisecond), float64(n)/sending.Seconds(),
		completed.Sub(accepted).Round(time.Millisecond), st.Accepted, st.Recipients, st.DuplicateRecipients, st.Errors["130429"])
}

// startCampaignDispatcher runs the campaign dispatcher's program (built from
// services/dispatcher, with its defaults: tuning, provider client, its own
// pool and NATS connection) against the gateway's database, stream and
// Redis, sending to providerURL; it is stopped, and must stop cleanly, when
// the test ends.
func startCampaignDispatcher(t *testing.T, g *gw, providerURL string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "campaign-dispatcher")
	if err := serviceproc.BuildService(context.Background(), "campaign-dispatcher", bin, os.Stderr); err != nil {
		t.Fatal(err)
	}
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := serviceproc.Start(context.Background(), serviceproc.Options{
		Name: "campaign-dispatcher", Bin: bin, Probe: "http://" + addr + "/readyz",
		Env: []string{
			"PARLEY_CAMPAIGN_DISPATCHER_ADDR=" + addr,
			"PARLEY_POSTGRES_URL=" + g.dbURL,
			"PARLEY_NATS_URL=" + g.busCfg.URL, "PARLEY_NATS_STREAM=" + g.busCfg.Stream,
			"PARLEY_NATS_SUBJECT_PREFIX=" + g.busCfg.Prefix,
			"PARLEY_NATS_STREAM_REPLICAS=" + strconv.Itoa(g.busCfg.StreamReplicas),
			"PARLEY_REDIS_ADDR=" + g.redis.Addr, "PARLEY_REDIS_KEY_PREFIX=" + g.redis.KeyPrefix,
			"PARLEY_WHATSAPP_BASE_URL=" + providerURL,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("campaign dispatcher: %v\n%s", err, p.Logs())
		}
	})
}
