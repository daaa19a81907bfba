//go:build drill || bench

package webhooksender

// The webhook drills and make bench-events run the real binaries (this
// sender, the campaign dispatcher and provider-sim), built once, in a
// drillenv environment: an embedded NATS, the local Redis under a key prefix of their
// own and a fresh database; the receiver is the test receiver
// (pkg/webhooks/webhooksim) in this process, on a listener the drill can
// close and reopen. A statement trigger copies every event the outbox ever
// gets into drill_events, the truth the receiver's counts are held to
// (make bench-statuses, which counts per wamid, leaves it out).

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// TestMain builds the dispatchers and provider-sim (drillenv.Main); the
// sender is built next to them on first use.
func TestMain(m *testing.M) { drillenv.Main(m) }

// senderBin is the webhook sender's binary, built once into
// drillenv.Bins.Dir.
func senderBin(t testing.TB) string { return drillenv.Bin(t, "webhook-sender") }

// env is a drill environment (drillenv: a fresh database, an embedded NATS,
// Redis under a prefix, provider-sim) with webhook endpoints and the test
// receiver.
type env struct {
	*drillenv.Env
	t     *testing.T
	hooks *webhooks.Store
	recv  *webhooksim.Receiver
	rl    *receiverListener
}

func newEnv(t *testing.T) *env { return newEnvWith(t, envOptions{}) }

// envOptions change what newEnvWith prepares.
type envOptions struct {
	// pgURL is a private cluster's database (drillenv.Options.PGURL).
	pgURL string
	// noEventLog leaves drill_events out: a benchmark that measures
	// PostgreSQL's work per event must not pay the trigger's copy.
	noEventLog bool
}

func newEnvWith(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{Env: drillenv.New(t, drillenv.Options{PGURL: o.pgURL}), t: t}
	hcfg := webhooks.DefaultConfig()
	hcfg.AllowPrivate = true
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	e.hooks = webhooks.NewStore(e.Pool, box, hcfg)
	if !o.noEventLog {
		e.logEvents()
	}
	e.recv = webhooksim.New()
	e.rl = &receiverListener{addr: drillenv.FreeAddr(t), h: e.recv}
	e.rl.up(t)
	t.Cleanup(func() {
		e.recv.Close()
		e.rl.down()
	})
	return e
}

// logEvents installs drill_events: a statement trigger copies every event
// the outbox gets into it.
func (e *env) logEvents() {
	e.t.Helper()
	if _, err := e.Pool.Exec(e.Ctx, `
		CREATE TABLE drill_events (id uuid PRIMARY KEY, company_id bigint, type text, occurred_at timestamptz);
		CREATE FUNCTION drill_log() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO drill_events SELECT id, company_id, type, occurred_at FROM fresh ON CONFLICT DO NOTHING; RETURN NULL; END $$;
		CREATE TRIGGER drill_log AFTER INSERT ON event_outbox REFERENCING NEW TABLE AS fresh
		FOR EACH STATEMENT EXECUTE FUNCTION drill_log();`); err != nil {
		e.t.Fatal(err)
	}
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

// startDispatcher runs the campaign dispatcher.
func (e *env) startDispatcher() *serviceproc.Process {
	p, _ := e.StartCampaign()
	return p
}

// startSender runs the webhook sender; it returns the process and its
// metrics URL.
func (e *env) startSender(extra ...string) (*serviceproc.Process, string) {
	addr := drillenv.FreeAddr(e.t)
	p := drillenv.StartProc(e.t, "webhook-sender", senderBin(e.t), "http://"+addr+"/readyz", 30*time.Second,
		append([]string{
			"PARLEY_POSTGRES_URL=" + e.DBURL, "PARLEY_POSTGRES_MAX_CONNS=20",
			"PARLEY_NATS_URL=" + e.BusCfg.URL, "PARLEY_NATS_STREAM=" + e.BusCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + e.BusCfg.Prefix,
			"PARLEY_LOG_LEVEL=warn", "PARLEY_LOG_FORMAT=console",
			"PARLEY_WEBHOOK_SENDER_ADDR=" + addr, "PARLEY_WEBHOOKS_ALLOW_PRIVATE=true",
			"PARLEY_WEBHOOK_SENDER_STREAM=" + e.BusCfg.Stream + "_EVENTS",
		}, extra...)...)
	return p, "http://" + addr + "/metrics"
}

// company is a drill sender (drillenv.NewSender: an account the simulator
// serves, a template, a campaign) with one webhook endpoint at the
// receiver's /hooks/<slug>.
type company struct {
	drillenv.Sender
	name string
}

// newCompanyAt is a company whose account sends perSecond messages.
func (e *env) newCompanyAt(slug string, perSecond int) company {
	e.t.Helper()
	s := e.NewSender(slug, perSecond)
	secret, _, err := e.hooks.Create(e.Ctx, s.Company.ID, webhooks.Input{URL: "http://" + e.rl.addr + "/hooks/" + slug})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.recv.Set(slug, webhooksim.Settings{Secrets: []string{secret}}); err != nil {
		e.t.Fatal(err)
	}
	return company{Sender: s, name: slug}
}

// campaign publishes a campaign of n new phones as the gateway does.
func (e *env) campaign(c company, n int) string {
	e.t.Helper()
	id, _ := e.PublishCampaign(c.Sender, e.NextPhones(n))
	return id
}

// expected is every event id of a company the outbox ever got.
func (e *env) expected(c company) []string {
	e.t.Helper()
	rows, err := e.Pool.Query(e.Ctx, `SELECT id::text FROM drill_events WHERE company_id = $1`, c.Company.ID)
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
		if e.Count(`SELECT count(*) FROM drill_events WHERE company_id = $1`, c.Company.ID) >= messages+1 {
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
