//go:build bench

package campaign

// make bench-delivery, the campaign part: delivery figures through one
// campaign dispatcher instance, with the real binaries on this machine's
// shared cores (the automation part, its latency during a campaign
// backlog, is services/automation-dispatcher/bench_test.go). Each part prints
// what it measured; the checks are the targets that do not depend
// on the machine (rates within 5% of the account's throughput), so the
// speed figures are reported, not asserted.

import (
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/drilltally"
	"github.com/parleyhq/parley/testkit/pgwrites"
	"github.com/parleyhq/parley/testkit/proccpu"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

func TestBenchDelivery(t *testing.T) {
	t.Run("Floor/latency=0", benchFloor)
	t.Run("Throughput/latency=0", func(t *testing.T) { benchThroughput(t, 0, 50_000) })
	t.Run("Throughput/latency=100ms", func(t *testing.T) { benchThroughput(t, 100*time.Millisecond, 50_000) })
	t.Run("AccountRates", benchAccountRates)
	t.Run("Rules", benchRules)
}

// benchThroughput publishes n messages for one account whose throughput is
// raised out of the way and measures messages per second from the first
// publish ack to the provider's receipt of the last, and to the last
// outcome recorded.
func benchThroughput(t *testing.T, latency time.Duration, n int) {
	e := drillenv.New(t, drillenv.Options{SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=" + latency.String()}})
	s := e.NewSender("bench", 1_000_000)
	workers := "512"
	if latency > 0 {
		workers = "2048" // 5,000/s at 100 ms each is 500 calls in flight
	}
	d, addr := e.StartCampaign("PARLEY_DISPATCH_WORKERS="+workers, "PARLEY_WHATSAPP_MAX_CONNS="+workers)
	cpu0, sim0, pg0 := drillenv.CPUSeconds(d.Pid()), drillenv.CPUSeconds(e.SimP.Pid()), drillenv.PostgresCPUSeconds()
	var first time.Time
	for i := 0; i < n/1000; i++ {
		_, at := e.PublishCampaign(s, e.NextPhones(1000))
		if i == 0 {
			first = at
		}
	}
	published := time.Since(first)
	e.WaitReceived(int64(n), 5*time.Minute)
	last := e.SimMessages(url.Values{"limit": {"1"}})[0].ReceivedAt
	for e.Count(`SELECT count(*) FROM messages WHERE state = 'sent'`) < n {
		time.Sleep(10 * time.Millisecond)
	}
	recorded := time.Since(first)
	toProvider := last.Sub(first)
	st := e.SimStats()
	t.Logf("latency %s: %d messages through one dispatcher (workers %s): published in %s; first publish ack -> last provider receipt %s = %.0f msg/s; -> every outcome recorded %s = %.0f msg/s; provider requests %d, errors %v",
		latency, n, workers, published.Round(time.Millisecond), toProvider.Round(time.Millisecond), float64(n)/toProvider.Seconds(),
		recorded.Round(time.Millisecond), float64(n)/recorded.Seconds(), st.Requests, st.Errors)
	t.Logf("CPU used: dispatcher %.1f s, provider-sim %.1f s, PostgreSQL %.1f s (every backend, other users' included), in %.1f s wall on %d cores",
		drillenv.CPUSeconds(d.Pid())-cpu0, drillenv.CPUSeconds(e.SimP.Pid())-sim0, drillenv.PostgresCPUSeconds()-pg0, recorded.Seconds(), runtime.NumCPU())
	t.Logf("dispatcher: %s", drillenv.MetricLines(t, "http://"+addr+"/metrics", "parley_delivery_send_seconds_sum", "parley_delivery_send_seconds_count",
		"parley_delivery_record_flush_seconds_sum", "parley_delivery_record_flush_seconds_count", "parley_delivery_claim_size_sum", "parley_delivery_claim_size_count"))
	for _, p := range e.Take().Problems(drilltally.Expect{}) {
		t.Errorf("%s", p)
	}
}

// benchAccountRates runs three accounts at the default 80 messages per
// second through one dispatcher and measures each one's rate twice: at the
// provider (which itself refuses more than 80/s with 130429) and from the
// dispatcher's own send times (messages.sent_at, taken when the provider
// answered). Either outside 5% of 80, or any 130429 at all (the limiter
// must keep the dispatcher under the provider's rate, as
// pkg/delivery/README.md says), fails the bench.
func benchAccountRates(t *testing.T) {
	e := drillenv.New(t, drillenv.Options{})
	const perAccount = 1200 // 15 s at 80/s
	var senders []drillenv.Sender
	for i := range 3 {
		senders = append(senders, e.NewSender(fmt.Sprintf("rate%d", i), 80))
	}
	e.StartCampaign()
	for _, s := range senders {
		for range perAccount / 400 {
			e.PublishCampaign(s, e.NextPhones(400))
		}
	}
	e.WaitReceived(3*perAccount, 2*time.Minute)
	tl := e.Settle(30 * time.Second)
	for _, p := range tl.Problems(drilltally.Expect{}) {
		t.Errorf("%s", p)
	}
	for _, s := range senders {
		msgs := e.SimMessages(url.Values{"phone_number_id": {s.Acct.PhoneNumberID}, "limit": {strconv.Itoa(perAccount)}})
		if len(msgs) != perAccount {
			t.Fatalf("account %s: %d messages", s.Acct.PhoneNumberID, len(msgs))
		}
		span := msgs[len(msgs)-1].ReceivedAt.Sub(msgs[0].ReceivedAt)
		rate := float64(len(msgs)-1) / span.Seconds()
		// The steady rate, without the first second's burst.
		var steady []drillenv.SimReceived
		for _, m := range msgs {
			if m.ReceivedAt.Sub(msgs[0].ReceivedAt) >= time.Second {
				steady = append(steady, m)
			}
		}
		steadyRate := float64(len(steady)-1) / steady[len(steady)-1].ReceivedAt.Sub(steady[0].ReceivedAt).Seconds()
		// The dispatcher's own clock: when each send was answered.
		var sent int
		var first, last time.Time
		if err := e.Pool.QueryRow(e.Ctx, `SELECT count(*), min(sent_at), max(sent_at) FROM messages
			WHERE messaging_account_id = $1 AND sent_at IS NOT NULL`, s.Acct.ID).Scan(&sent, &first, &last); err != nil {
			t.Fatal(err)
		}
		sentRate := float64(sent-1) / last.Sub(first).Seconds()
		t.Logf("account %s: %d messages in %s: at the provider %.2f msg/s overall, %.2f msg/s after the first second; by the dispatcher's send times %d in %s, %.2f msg/s",
			s.Acct.PhoneNumberID, len(msgs), span.Round(time.Millisecond), rate, steadyRate, sent, last.Sub(first).Round(time.Millisecond), sentRate)
		if rate < 76 || rate > 84 {
			t.Errorf("account %s: %.2f msg/s at the provider is not within 5%% of 80", s.Acct.PhoneNumberID, rate)
		}
		if sent != perAccount || sentRate < 76 || sentRate > 84 {
			t.Errorf("account %s: %d sends at %.2f msg/s by the dispatcher's send times, want %d within 5%% of 80", s.Acct.PhoneNumberID, sent, sentRate, perAccount)
		}
	}
	st := e.SimStats()
	t.Logf("provider: %d requests, %d accepted, errors %v", st.Requests, st.Accepted, st.Errors)
	if n := st.Errors["130429"]; n > 0 {
		t.Errorf("the provider refused %d sends with 130429 (throughput exceeded): the dispatcher's limiter let them through", n)
	}
}

// testProcess names the bench's own process in the CPU figures: it embeds
// nats-server and publishes (and polls PostgreSQL).
const testProcess = "test process (embedded nats-server, publisher)"

// floorPhase is what one dispatcher did with the floor's messages.
type floorPhase struct {
	name  string
	wall  time.Duration
	cpu   map[string]time.Duration
	pg    pgwrites.Counters
	polls int
}

func (f floorPhase) rate(n int) float64 { return float64(n) / f.wall.Seconds() }

// benchFloor measures the campaign dispatcher against a floor of its own:
// the naive dispatcher of naive_test.go, then the campaign
// dispatcher, on the same 20,000 messages (20 batches of 1000 contacts,
// published as the gateway does once the dispatcher is ready) with a
// zero-latency provider, on a private PostgreSQL cluster (so that its WAL
// is the run's alone). Each phase: messages per second from the first
// publish ack to the last outcome recorded; CPU per message by process
// tree; PostgreSQL's commits, rows and WAL per message. A lost or
// duplicated message at provider-sim, per recipient, fails either phase,
// and a ratio under floorTarget fails the bench.
func benchFloor(t *testing.T) {
	const n, workers = 20_000, "512"
	pg := drillenv.StartPrivatePG(t)
	e := drillenv.New(t, drillenv.Options{PGURL: pg.URL, SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=0s"}})
	s := e.NewSender("floor", 1_000_000)
	phones := e.NextPhones(n)
	if _, err := e.Pool.Exec(e.Ctx, naiveTable); err != nil {
		t.Fatal(err)
	}
	sim := drilltally.Sim{URL: e.Sim.Base}

	// run publishes the messages to a ready dispatcher and waits until
	// done, a count of the batches whose outcomes are all recorded, reaches
	// the batches published; then recorded, the count of outcomes, must be
	// n. The dispatcher is stopped (its connections closed, so that
	// PostgreSQL has its counters) before the last sample. The poll reads
	// 20 rows, not the outcomes: a count over the messages every 50 ms
	// scanned up to 40,000 row versions each time, and that PostgreSQL CPU
	// was charged to the dispatcher.
	const batches = n / 1000
	run := func(name string, p *serviceproc.Process, done, recorded string) floorPhase {
		t.Helper()
		roots := map[string]int{name: p.Pid(), "provider-sim": e.SimP.Pid(), "postgres": pg.Pid()}
		// The test process's own CPU: its children are roots of their own.
		self := func() time.Duration {
			d, err := proccpu.Own(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		poll, err := pgxpool.New(e.Ctx, e.DBURL)
		if err != nil {
			t.Fatal(err)
		}
		pg0, err := pgwrites.Read(e.Ctx, e.Pool)
		if err != nil {
			t.Fatal(err)
		}
		cpu0, err := proccpu.Tree(roots)
		if err != nil {
			t.Fatal(err)
		}
		self0 := self()
		var first time.Time
		for i := 0; i < batches; i++ {
			_, at := e.PublishCampaign(s, phones[i*1000:(i+1)*1000])
			if i == 0 {
				first = at
			}
		}
		f := floorPhase{name: name}
		for deadline := time.Now().Add(5 * time.Minute); ; {
			var got int
			if err := poll.QueryRow(e.Ctx, done).Scan(&got); err != nil {
				t.Fatal(err)
			}
			f.polls++
			if got >= batches {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d batches recorded within 5 minutes", name, got, batches)
			}
			time.Sleep(50 * time.Millisecond)
		}
		f.wall = time.Since(first)
		cpu1, err := proccpu.Tree(roots)
		if err != nil {
			t.Fatal(err)
		}
		f.cpu = map[string]time.Duration{testProcess: self() - self0}
		for k, v := range cpu1 {
			f.cpu[k] = v - cpu0[k]
		}
		// After the CPU sample: this count scans every outcome.
		var got int
		if err := poll.QueryRow(e.Ctx, recorded).Scan(&got); err != nil {
			t.Fatal(err)
		}
		f.polls++
		if got != n {
			t.Fatalf("%s: every batch done with %d of %d outcomes recorded", name, got, n)
		}
		if err := p.Stop(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		poll.Close()
		time.Sleep(2 * time.Second) // the closed backends' counters
		pg1, err := pgwrites.Read(e.Ctx, e.Pool)
		if err != nil {
			t.Fatal(err)
		}
		f.pg = pg1.Minus(pg0)
		f.pg.Commits -= int64(f.polls) // the bench's own count queries
		return f
	}
	report := func(f floorPhase) {
		t.Logf("%s: %d messages, first publish ack -> every outcome recorded %s = %.0f msg/s", f.name, n, f.wall.Round(time.Millisecond), f.rate(n))
		var parts []string
		for _, k := range []string{f.name, "provider-sim", "postgres", testProcess} {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(f.cpu[k].Microseconds())/n))
		}
		t.Logf("  CPU µs per message: %s (%d cores, shared machine)", strings.Join(parts, ", "), runtime.NumCPU())
		t.Logf("  %s (the bench's %d count queries left out)", f.pg.Per(n, "message"), f.polls)
	}

	// The floor.
	addr := drillenv.FreeAddr(t)
	naive := drillenv.StartProc(t, "naive-dispatcher", os.Args[0], "http://"+addr+"/readyz", 30*time.Second,
		append(e.DispatcherEnv("PARLEY_NAIVE_ADDR", addr, "PARLEY_DISPATCH_WORKERS="+workers),
			naiveEnv+"=1", "PARLEY_NAIVE_PHONE_NUMBER_ID="+s.Acct.PhoneNumberID, "PARLEY_NAIVE_ACCESS_TOKEN="+drillenv.Token)...)
	floor := run("naive-dispatcher", naive, `SELECT count(*) FROM naive_batches`, `SELECT count(*) FROM naive_outcomes`)
	report(floor)
	counts, err := sim.Counts(e.Ctx, phones)
	if err != nil {
		t.Fatal(err)
	}
	var lost, dup int64
	for _, c := range counts {
		if c == 0 {
			lost++
		} else {
			dup += c - 1
		}
	}
	st := e.SimStats()
	t.Logf("  naive dispatcher at provider-sim: %d accepted, lost %d, duplicated %d, errors %v", st.Accepted, lost, dup, st.Errors)
	if lost != 0 || dup != 0 || st.Accepted != n {
		t.Errorf("naive dispatcher: lost %d, duplicated %d, provider accepted %d of %d", lost, dup, st.Accepted, n)
	}
	var failed int
	if err := e.Pool.QueryRow(e.Ctx, `SELECT count(*) FROM naive_outcomes WHERE error IS NOT NULL`).Scan(&failed); err != nil || failed != 0 {
		t.Errorf("naive dispatcher: %d failed outcomes (%v)", failed, err)
	}
	// The work-queue stream takes one consumer per subject: the campaign
	// dispatcher's replaces the naive one. The provider forgets the sends.
	if err := e.JS.DeleteConsumer(e.Ctx, e.BusCfg.Stream, naiveConsumer); err != nil {
		t.Fatal(err)
	}
	e.Sim.Do("POST", "/_sim/reset", nil, nil)

	// The campaign dispatcher, on the same phones.
	d, _ := e.StartCampaign("PARLEY_DISPATCH_WORKERS="+workers, "PARLEY_WHATSAPP_MAX_CONNS="+workers)
	disp := run("campaign-dispatcher", d, `SELECT count(*) FROM batches WHERE status = 'completed'`,
		`SELECT count(*) FROM messages WHERE state = 'sent'`)
	report(disp)
	tl := e.Take()
	t.Logf("  campaign dispatcher: %s", tl)
	for _, p := range tl.Problems(drilltally.Expect{}) {
		t.Errorf("campaign dispatcher: %s", p)
	}

	bound := recordBound(t, e, n)
	// The best ratio a dispatcher that keeps a messages row could reach:
	// the floor itself, with its outcome row replaced by one messages row
	// written once, with its final state (no claim, no update, no rule, no
	// completion), on the same CPU as everything else.
	floorCPU := 0.0
	for _, d := range floor.cpu {
		floorCPU += float64(d.Microseconds()) / n
	}
	best := floorCPU / (floorCPU - bound.floorRow + bound.messageRow)
	t.Logf("PostgreSQL CPU per row written alone (one statement of %d rows, nothing else running): the floor's outcome row %.1f µs, a messages row written once with its final state %.1f µs; so a dispatcher that keeps a messages row and costs nothing else more than the floor reaches at best %.2fx (floor CPU per message %.1f µs in all)",
		n, bound.floorRow, bound.messageRow, best, floorCPU)

	ratio := disp.rate(n) / floor.rate(n)
	t.Logf("dispatcher/floor: %.0f / %.0f msg/s = %.2fx (target >= %.1fx); CPU per message, dispatcher process %.1f µs vs naive %.1f µs; PostgreSQL commits per message %.3f vs %.3f, WAL bytes %.0f vs %.0f",
		disp.rate(n), floor.rate(n), ratio, floorTarget,
		float64(disp.cpu["campaign-dispatcher"].Microseconds())/n, float64(floor.cpu["naive-dispatcher"].Microseconds())/n,
		float64(disp.pg.Commits)/n, float64(floor.pg.Commits)/n, float64(disp.pg.WALBytes)/n, float64(floor.pg.WALBytes)/n)
	if ratio < floorTarget {
		t.Errorf("target missed: the campaign dispatcher at %.2fx its naive floor, want at least %.1fx", ratio, floorTarget)
	}
}

// floorTarget is the least ratio of the campaign dispatcher's messages per
// second to its naive floor's: what make bench-delivery-floor asserts.
const floorTarget = 1.0

// rowCosts is PostgreSQL's CPU per row to write one outcome: the floor's
// row, and the least the dispatcher's record costs.
type rowCosts struct{ floorRow, messageRow float64 }

// recordBound measures, on the bench's database with the dispatchers
// stopped, the CPU of the PostgreSQL backend that inserts n rows in one
// statement: into naive_outcomes as the floor records an outcome, and into
// messages as a message would be if it were written only once, sent, with
// its provider message id (every index, constraint and foreign-key check of
// the real table). The rows are of a batch of their own and are deleted
// afterwards.
func recordBound(t *testing.T, e *drillenv.Env, n int) rowCosts {
	t.Helper()
	conn, err := e.Pool.Acquire(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int
	var company int64
	if err := conn.QueryRow(e.Ctx, `SELECT pg_backend_pid(), (SELECT company_id FROM batches LIMIT 1)`).Scan(&pid, &company); err != nil {
		t.Fatal(err)
	}
	const batch = "01a218df-0000-7000-8000-00000000b0bd"
	if _, err := conn.Exec(e.Ctx, `INSERT INTO batches (id, company_id, kind, source, contact_count, accepted_at, status)
		VALUES ($1, $2, 'campaign', 'api', $3, now(), 'processing')`, batch, company, n); err != nil {
		t.Fatal(err)
	}
	cpu := func(sql string, args ...any) float64 {
		t.Helper()
		c0, err := proccpu.Own(pid)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(e.Ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
		c1, err := proccpu.Own(pid)
		if err != nil {
			t.Fatal(err)
		}
		return float64((c1 - c0).Microseconds()) / float64(n)
	}
	var r rowCosts
	r.floorRow = cpu(`INSERT INTO naive_outcomes (batch_id, phone, wamid, error, sent_at)
		SELECT $1::text, '+4477' || (10000000 + g), 'wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI1RjQyNUE3NEYxMzAzMzQ5MkEA' || g, NULL, now()
		FROM generate_series(1, $2::int) g`, batch, n)
	r.messageRow = cpu(`INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, state, lane, template_id,
			provider_message_id, attempts, not_before, sent_at, created_at, updated_at)
		SELECT $1::uuid, g, $2, '+4477' || (10000000 + g), a.id, 'sent', 'campaign', NULL,
			'wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI1RjQyNUE3NEYxMzAzMzQ5MkEA' || g, 1, now(), now(), now(), now()
		FROM generate_series(0, $3::int - 1) g, (SELECT min(id) AS id FROM messaging_accounts) a`, batch, company, n)
	// The batch's messages go with it (ON DELETE CASCADE).
	if _, err := conn.Exec(e.Ctx, `DELETE FROM batches WHERE id = $1`, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(e.Ctx, `DELETE FROM naive_outcomes WHERE batch_id = $1`, batch); err != nil {
		t.Fatal(err)
	}
	return r
}
