//go:build drill || bench

package main

// The webhook drills and make bench-events run the real binaries (this
// sender, the campaign dispatcher and provider-sim), built once in TestMain,
// against an embedded NATS, the local Redis under a key prefix of their
// own and a fresh database; the receiver is the test receiver
// (pkg/webhooks/webhooksim) in this process, on a listener the drill can
// close and reopen. A statement trigger copies every event the outbox ever
// gets into drill_events, the truth the receiver's counts are held to.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/serviceproc"
	"github.com/parleyhq/parley/testkit/storetest"
)

var bins struct{ sender, campaign, providerSim string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "parley-webhook-drill-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, b := range []struct {
		out      *string
		dir, bin string
	}{
		{&bins.sender, ".", "webhook-sender"},
		{&bins.campaign, "../campaign-dispatcher", "campaign-dispatcher"},
		{&bins.providerSim, "../provider-sim", "provider-sim"},
	} {
		*b.out = filepath.Join(dir, b.bin)
		if err := serviceproc.Build(context.Background(), b.dir, *b.out, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const drillToken = "drill-access-token-0123456789"

type env struct {
	t      *testing.T
	ctx    context.Context
	dbURL  string
	pool   *pgxpool.Pool
	cat    *catalog.Store
	hooks  *webhooks.Store
	busCfg bus.Config
	js     jetstream.JetStream
	redis  ratelimit.RedisConfig
	simURL string
	recv   *webhooksim.Receiver
	rl     *receiverListener
	phones int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), phones: 14150000000}
	e.dbURL, e.pool = storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	e.cat = catalog.NewStore(e.pool, box)
	hcfg := webhooks.DefaultConfig()
	hcfg.AllowPrivate = true
	e.hooks = webhooks.NewStore(e.pool, box, hcfg)
	if _, err := e.pool.Exec(e.ctx, `
		CREATE TABLE drill_events (id uuid PRIMARY KEY, company_id bigint, type text, occurred_at timestamptz);
		CREATE FUNCTION drill_log() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO drill_events SELECT id, company_id, type, occurred_at FROM fresh ON CONFLICT DO NOTHING; RETURN NULL; END $$;
		CREATE TRIGGER drill_log AFTER INSERT ON event_outbox REFERENCING NEW TABLE AS fresh
		FOR EACH STATEMENT EXECUTE FUNCTION drill_log();`); err != nil {
		t.Fatal(err)
	}
	ns := bustest.NewServer(t)
	e.busCfg = bustest.Config(ns.URL())
	nc, err := bus.Connect(e.busCfg, "drill")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if e.js, err = bus.JetStream(nc); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(e.ctx, e.js, e.busCfg); err != nil {
		t.Fatal(err)
	}
	e.redis = ratelimittest.Config(t)
	simAddr := drillenv.FreeAddr(t)
	e.simURL = "http://" + simAddr
	drillenv.StartProc(t, "provider-sim", bins.providerSim, e.simURL+"/_sim/stats", 20*time.Second,
		"PARLEY_PROVIDER_SIM_ADDR="+simAddr, "PARLEY_LOG_LEVEL=warn",
		"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER=100000", "PARLEY_PROVIDER_SIM_MAX_RECIPIENTS=500000")
	e.recv = webhooksim.New()
	e.rl = &receiverListener{addr: drillenv.FreeAddr(t), h: e.recv}
	e.rl.up(t)
	t.Cleanup(func() {
		e.recv.Close()
		e.rl.down()
	})
	return e
}

// receiverListener serves the receiver on a fixed address that can go down
// (connections refused) and come back.
type receiverListener struct {
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func (r *receiverListener) up(t testing.TB) {
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("receiver listen %s: %v", r.addr, err)
	}
	srv := &http.Server{Handler: r.h, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("receiver: %v", err)
		}
	}()
}

func (r *receiverListener) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

func (e *env) commonEnv() []string {
	return []string{
		"PARLEY_POSTGRES_URL=" + e.dbURL, "PARLEY_POSTGRES_MAX_CONNS=20",
		"PARLEY_NATS_URL=" + e.busCfg.URL, "PARLEY_NATS_STREAM=" + e.busCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + e.busCfg.Prefix,
		"PARLEY_LOG_LEVEL=warn", "PARLEY_LOG_FORMAT=console",
	}
}

// startDispatcher runs the campaign dispatcher.
func (e *env) startDispatcher() *serviceproc.Process {
	addr := drillenv.FreeAddr(e.t)
	return drillenv.StartProc(e.t, "campaign-dispatcher", bins.campaign, "http://"+addr+"/readyz", 30*time.Second,
		append(e.commonEnv(), "PARLEY_CAMPAIGN_DISPATCHER_ADDR="+addr,
			"PARLEY_REDIS_ADDR="+e.redis.Addr, "PARLEY_REDIS_KEY_PREFIX="+e.redis.KeyPrefix,
			"PARLEY_WHATSAPP_BASE_URL="+e.simURL, "PARLEY_WHATSAPP_TIMEOUT=2s")...)
}

// startSender runs the webhook sender; it returns the process and its
// metrics URL.
func (e *env) startSender(extra ...string) (*serviceproc.Process, string) {
	addr := drillenv.FreeAddr(e.t)
	p := drillenv.StartProc(e.t, "webhook-sender", bins.sender, "http://"+addr+"/readyz", 30*time.Second,
		append(append(e.commonEnv(), "PARLEY_WEBHOOK_SENDER_ADDR="+addr, "PARLEY_WEBHOOKS_ALLOW_PRIVATE=true",
			"PARLEY_WEBHOOK_SENDER_STREAM="+e.busCfg.Stream+"_EVENTS"), extra...)...)
	return p, "http://" + addr + "/metrics"
}

// company is a company with an account the simulator serves, a template,
// a campaign and one webhook endpoint at the receiver's /hooks/<slug>.
// newCompany's account is as fast as the machine.
type company struct {
	c    catalog.Company
	camp catalog.Campaign
	name string
}

var pnidSeq = time.Now().UnixNano() % 1_000_000

// newCompanyAt is a company whose account sends perSecond messages.
func (e *env) newCompanyAt(slug string, perSecond int) company {
	e.t.Helper()
	c, err := e.cat.CreateCompany(e.ctx, catalog.NewCompany{Slug: slug, Name: slug, SubscriptionActive: true, Provisioned: true})
	if err != nil {
		e.t.Fatal(err)
	}
	pnidSeq++
	pnid := fmt.Sprintf("77%09d", pnidSeq)
	acct, err := e.cat.CreateMessagingAccount(e.ctx, catalog.NewMessagingAccount{CompanyID: c.ID, Name: "main",
		PhoneNumberID: pnid, AccessToken: drillToken, Connected: true, ThroughputPerSecond: perSecond})
	if err != nil {
		e.t.Fatal(err)
	}
	e.simPut("/_sim/accounts/"+pnid, fmt.Sprintf(`{"token":%q,"throughput_per_second":%d}`, drillToken, perSecond))
	tpl, err := e.cat.CreateTemplate(e.ctx, catalog.NewTemplate{CompanyID: c.ID, Template: whatsapp.Template{
		Name: "drill_update", Language: "en_US", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	camp, err := e.cat.CreateCampaign(e.ctx, c.ID, "drill", tpl.ID, acct.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	secret, _, err := e.hooks.Create(e.ctx, c.ID, webhooks.Input{URL: "http://" + e.rl.addr + "/hooks/" + slug})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.recv.Set(slug, webhooksim.Settings{Secrets: []string{secret}}); err != nil {
		e.t.Fatal(err)
	}
	return company{c: c, camp: camp, name: slug}
}

func (e *env) simPut(path, body string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, e.simURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		e.t.Fatalf("PUT %s: %d", path, resp.StatusCode)
	}
}

// campaign publishes a campaign of n new phones as the gateway does.
func (e *env) campaign(c company, n int) string {
	e.t.Helper()
	phones := make([]string, n)
	for i := range phones {
		phones[i] = "+" + strconv.FormatInt(e.phones, 10)
		e.phones++
	}
	id := uuid.Must(uuid.NewV7()).String()
	data, err := proto.Marshal(&sendsv1.CampaignBatch{BatchId: id, CompanyId: c.c.ID, CampaignId: c.camp.ID, Phones: phones,
		AcceptedAt: timestamppb.Now(), Source: "api:campaigns/send"})
	if err != nil {
		e.t.Fatal(err)
	}
	subject := bus.ForBatch(e.busCfg.CampaignSubject(c.c.ID), id)
	if _, err := e.js.PublishMsg(e.ctx, &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(id)); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// expected is every event id of a company the outbox ever got.
func (e *env) expected(c company) []string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT id::text FROM drill_events WHERE company_id = $1`, c.c.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// tally is what the receiver got of a company's events.
type tally struct {
	events, received, lost, duplicates int
}

func (e *env) tally(c company) tally {
	want := e.expected(c)
	got := e.recv.Counts(c.name)
	tl := tally{events: len(want)}
	for _, id := range want {
		n := got[id]
		if n == 0 {
			tl.lost++
			continue
		}
		tl.received++
		tl.duplicates += n - 1
	}
	return tl
}

// waitAll waits until every event of c in the outbox so far was received
// and the campaign's messages are all recorded (n messages, one batch).
func (e *env) waitAll(c company, messages int, within time.Duration) tally {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		// n message.sent plus one batch.completed.
		if e.count(`SELECT count(*) FROM drill_events WHERE company_id = $1`, c.c.ID) >= messages+1 {
			if tl := e.tally(c); tl.lost == 0 {
				return tl
			}
		}
		if time.Now().After(deadline) {
			tl := e.tally(c)
			e.t.Fatalf("%s: %d of %d events received within %s (%d lost)", c.name, tl.received, tl.events, within, tl.lost)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
