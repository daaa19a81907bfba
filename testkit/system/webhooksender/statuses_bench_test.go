//go:build bench

package webhooksender

// make bench-statuses: status callbacks applied in bulk by the gateway's
// group commit. The real gateway (and webhook sender) binaries, on a
// PostgreSQL cluster of the bench's own (fsync and synchronous_commit on,
// as in production, and pg_stat_statements), so that its CPU and WAL are
// the run's alone.
//
// N messages are recorded as sent with their wamids (fixtures, as a
// dispatcher leaves them); then signed WhatsApp status webhooks, 50
// statuses a POST as provider-sim and the Cloud API batch them at most
// (-statuses-per-post), are POSTed
// to the gateway at -statuses-rate statuses a second for -statuses-for:
// delivered and read for every message, read about a second after
// delivered, with every 10th message's read before its delivered, every
// 20th's both in one POST, every 25th's first status again a second later,
// and every 100th POST posted twice (a provider's retry). A POST answered
// other than 200 is retried a second later, as the provider does.
//
// Two parts, each on servers of its own (TestBenchStatuses): Apply, to a
// company without a webhook endpoint, is what the gateway and PostgreSQL
// spend to apply the statuses alone (a status is applied when its POST is
// answered 200: its group is committed). Events is the target's figure:
// the company takes its events at the test receiver, and per wamid there
// must be exactly one message.delivered and one message.read (a read
// without its delivered before it writes both), the delivered written
// before the read (event ids are UUIDv7, in the gateway's order of
// writing) and not changed later than it.
//
// Figures: statuses applied a second from the first POST to the last event
// at the receiver (Apply: to the last answer), and as the gateway
// answered; POST -> event p50, p99, max (from the first POST that carried
// the event's status: a delivered event from the first carrying the
// message's delivered or read; Apply: POST -> 200); the gateway's groups;
// CPU per status by process; PostgreSQL's commits, rows and WAL per status
// and its statements by time. Both parts fail on a figure short of its
// target: >= 10,000 statuses a second applied, p99 < 1 s, 0 lost, 0
// duplicated, 0 backwards (and every message read after delivered in the
// record), a load under 95% of its rate.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/pgwrites"
	"github.com/parleyhq/parley/testkit/proccpu"
)

var (
	statusRate = flag.Int("statuses-rate", 10_000, "bench-statuses: status callbacks POSTed a second")
	statusFor  = flag.Duration("statuses-for", 30*time.Second, "bench-statuses: how long they are POSTed")
	statusEnv  = flag.String("statuses-gateway-env", "", "bench-statuses: more gateway environment, comma separated")
	// 50 is the most provider-sim (and the Cloud API) put in one webhook;
	// a number that sends little gets 1 to 3.
	statusesPerPost = flag.Int("statuses-per-post", 50, "bench-statuses: statuses in one webhook")
)

const (
	// statusTarget is issue 25's: statuses applied a second on this machine.
	statusTarget = 10_000
	// statusP99 is the target from a POST to its event at the receiver.
	statusP99 = time.Second
)

// wireStatus is one status of the plan: message msg, read or delivered.
type wireStatus struct {
	msg  int32
	read bool
}

// statusPlan is what the bench POSTs, and for each message which POSTs
// first carried its statuses.
type statusPlan struct {
	messages int
	posts    [][]wireStatus
	// twice marks a POST posted again, 500 ms after its answer.
	twice []bool
	// firstAny and firstRead are the first POST that carried any status of
	// a message, and its read.
	firstAny, firstRead []int32
}

// planStatuses spreads delivered and read of n messages over POSTs of 50,
// in the order of the file comment: each message's second status about
// lag statuses after its first.
func planStatuses(n, lag int) statusPlan {
	var order []wireStatus
	first := func(i int) []wireStatus {
		m := int32(i)
		switch {
		case i%20 == 7: // both in one POST
			return []wireStatus{{m, false}, {m, true}}
		case i%10 == 3: // read first
			return []wireStatus{{m, true}}
		}
		return []wireStatus{{m, false}}
	}
	second := func(i int) []wireStatus {
		m := int32(i)
		var out []wireStatus
		switch {
		case i%20 == 7:
		case i%10 == 3:
			out = append(out, wireStatus{m, false})
		default:
			out = append(out, wireStatus{m, true})
		}
		if i%25 == 11 { // the first again
			out = append(out, first(i)...)
		}
		return out
	}
	steps := lag / 2
	for k := 0; k < n+steps; k++ {
		if k < n {
			order = append(order, first(k)...)
		}
		if j := k - steps; j >= 0 {
			order = append(order, second(j)...)
		}
	}
	p := statusPlan{messages: n, firstAny: make([]int32, n), firstRead: make([]int32, n)}
	for i := range p.firstAny {
		p.firstAny[i], p.firstRead[i] = -1, -1
	}
	for len(order) > 0 {
		k := min(*statusesPerPost, len(order))
		post := order[:k:k]
		order = order[k:]
		idx := int32(len(p.posts))
		for _, s := range post {
			if p.firstAny[s.msg] < 0 {
				p.firstAny[s.msg] = idx
			}
			if s.read && p.firstRead[s.msg] < 0 {
				p.firstRead[s.msg] = idx
			}
		}
		p.posts = append(p.posts, post)
		p.twice = append(p.twice, idx%100 == 99)
	}
	return p
}

// statuses counts the statuses the plan POSTs, the POSTs posted twice
// included.
func (p statusPlan) statuses() int {
	n := 0
	for i, post := range p.posts {
		n += len(post)
		if p.twice[i] {
			n += len(post)
		}
	}
	return n
}

func benchWamid(i int32) string { return "wamid.bench." + strconv.Itoa(int(i)) }

// body is a signed Cloud API webhook of a POST's statuses, as provider-sim
// words them; t0 is the first message's delivered time (seconds).
func (p statusPlan) body(post []wireStatus, pnid, waba string, t0 int64, perSecond int) []byte {
	v := whatsapp.WebhookValue{MessagingProduct: whatsapp.MessagingProduct,
		Metadata: whatsapp.WebhookMetadata{DisplayPhoneNumber: pnid, PhoneNumberID: pnid}}
	for _, s := range post {
		status, at := string(whatsapp.StatusDelivered), t0+int64(int(s.msg)/perSecond)
		if s.read {
			status, at = string(whatsapp.StatusRead), at+1
		}
		v.Statuses = append(v.Statuses, whatsapp.WebhookStatus{ID: benchWamid(s.msg), Status: status,
			Timestamp: strconv.FormatInt(at, 10), RecipientID: benchPhone(s.msg)[1:],
			Conversation: &whatsapp.WebhookConversation{ID: "conv." + pnid, Origin: map[string]string{"type": "marketing"}},
			Pricing:      &whatsapp.WebhookPricing{Billable: true, PricingModel: "PMP", Category: "marketing", Type: "regular"}})
	}
	b, _ := json.Marshal(whatsapp.WebhookPayload{Object: whatsapp.WebhookObject, Entry: []whatsapp.WebhookEntry{{
		ID: waba, Changes: []whatsapp.WebhookChange{{Field: "messages", Value: v}}}}})
	return b
}

func benchPhone(i int32) string { return "+1555" + fmt.Sprintf("%08d", i) }

// statusReceipts is what the receiver got, per message.
type statusReceipts struct {
	mu sync.Mutex
	// delivered and read count each message's events received; at is the
	// first receipt of each; ids and changed what the first carried.
	delivered, read     []int32
	deliveredAt, readAt []time.Time
	deliveredID, readID []string
	deliveredCh, readCh []time.Time
	other               int
	last                time.Time
}

func newStatusReceipts(n int) *statusReceipts {
	return &statusReceipts{delivered: make([]int32, n), read: make([]int32, n), deliveredAt: make([]time.Time, n),
		readAt: make([]time.Time, n), deliveredID: make([]string, n), readID: make([]string, n),
		deliveredCh: make([]time.Time, n), readCh: make([]time.Time, n)}
}

func (r *statusReceipts) observe(id string, body []byte, at time.Time) {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Wamid     string    `json:"provider_message_id"`
			ChangedAt time.Time `json:"changed_at"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	i, err := strconv.Atoi(strings.TrimPrefix(ev.Data.Wamid, "wamid.bench."))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = at
	if err != nil || i < 0 || i >= len(r.read) {
		r.other++
		return
	}
	switch ev.Type {
	case "message.delivered":
		if r.delivered[i]++; r.delivered[i] == 1 {
			r.deliveredAt[i], r.deliveredID[i], r.deliveredCh[i] = at, id, ev.Data.ChangedAt
		}
	case "message.read":
		if r.read[i]++; r.read[i] == 1 {
			r.readAt[i], r.readID[i], r.readCh[i] = at, id, ev.Data.ChangedAt
		}
	default:
		r.other++
	}
}

// complete is how many messages have both events.
func (r *statusReceipts) complete() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range r.read {
		if r.read[i] > 0 && r.delivered[i] > 0 {
			n++
		}
	}
	return n
}

// startStatusPG starts a PostgreSQL cluster of the bench's own, with
// PostgreSQL's defaults (fsync and synchronous_commit on), and returns its
// database's URL and its postmaster's pid.
func startStatusPG(t *testing.T) (string, int) {
	t.Helper()
	pg := drillenv.StartPrivatePGWith(t, "max_connections=200",
		"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on")
	return pg.URL, pg.Pid()
}

// sentFixtures records the plan's messages as sent by c's campaign, with
// their wamids, as a dispatcher leaves them.
func (e *env) sentFixtures(c company, n int) {
	e.t.Helper()
	var batch string
	if err := e.Pool.QueryRow(e.Ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, status, accepted_at, created_at, completed_at)
		VALUES (gen_random_uuid(), $1, 'campaign', 'api:campaigns_send', $2, $3, 'completed', now(), now(), now())
		RETURNING id::text`, c.Company.ID, c.Camp.ID, n).Scan(&batch); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.Pool.Exec(e.Ctx, `
		INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state, lane, attempts,
			created_at, updated_at, sent_at, provider_message_id)
		SELECT b.id, g, $2, '+1555' || lpad(g::text, 8, '0'), $3, $4, 'sent', 'campaign', 1,
			b.accepted_at, now(), now(), 'wamid.bench.' || g
		FROM batches b, generate_series(0, $5::int - 1) g WHERE b.id = $1::uuid`,
		batch, c.Company.ID, c.Acct.ID, c.Tpl.ID, n); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.Pool.Exec(e.Ctx, `VACUUM ANALYZE messages`); err != nil {
		e.t.Fatal(err)
	}
}

// postResult is one POST of the plan: when it started, when the gateway
// answered 200, and how many attempts it took.
type postResult struct {
	start, answered time.Time
	attempts        int
	refused         []int // statuses of answers other than 200 (-1: transport error)
}

// postPlan POSTs the plan to the gateway at rate statuses a second, each
// POST from its own goroutine, retrying an answer other than 200 a second
// later (up to 20 attempts), and returns each POST's result.
func (p statusPlan) post(gw, pnid, waba string, t0 int64, rate int) []postResult {
	res := make([]postResult, len(p.posts))
	interval := time.Second * time.Duration(*statusesPerPost) / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i, sts := range p.posts {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := p.body(sts, pnid, waba, t0, rate/2)
			sig := whatsapp.Sign(appSecret, body)
			r := &res[i]
			r.start = time.Now()
			send := func() {
				for r.attempts < 20 {
					r.attempts++
					st, _, err := post(gw+"/webhooks/whatsapp", body, whatsapp.SignatureHeader, sig)
					if err == nil && st == 200 {
						if r.answered.IsZero() {
							r.answered = time.Now()
						}
						return
					}
					if err != nil {
						st = -1
					}
					r.refused = append(r.refused, st)
					time.Sleep(time.Second)
				}
			}
			send()
			if p.twice[i] {
				time.Sleep(500 * time.Millisecond)
				send()
			}
		}()
	}
	wg.Wait()
	return res
}

// gatewayGroups reads the gateway's group commit metrics: groups by
// outcome, and the statuses they held.
func gatewayGroups(t *testing.T, gw string) (groups map[string]float64, statuses float64) {
	t.Helper()
	_, body, err := get(gw + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	groups = map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, `parley_gateway_status_groups_total{outcome="`); ok {
			o, v, _ := strings.Cut(rest, `"} `)
			groups[o], _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "parley_gateway_status_group_statuses_sum "); ok {
			statuses, _ = strconv.ParseFloat(v, 64)
		}
	}
	return groups, statuses
}

func get(url string) (int, []byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestBenchStatuses runs the load twice, each on servers of its own:
// Apply, to a company without a webhook endpoint (what the gateway and
// PostgreSQL spend to apply the statuses, alone; a status is applied when
// its POST is answered 200, its group committed), then Events, the
// figure of the target, counted at the company's endpoint.
func TestBenchStatuses(t *testing.T) {
	t.Run("Apply", func(t *testing.T) { benchStatuses(t, false) })
	t.Run("Events", func(t *testing.T) { benchStatuses(t, true) })
}

func benchStatuses(t *testing.T, events bool) {
	rate, span := *statusRate, *statusFor
	t.Logf("bench-statuses %s UTC, load average %s, %d cores; %d statuses/s for %s, %d a POST; events to a receiver: %v",
		time.Now().UTC().Format("2006-01-02 15:04"), loadAverage(), runtime.NumCPU(), rate, span, *statusesPerPost, events)
	pgURL, pgPid := startStatusPG(t)
	e := newEnvWith(t, envOptions{pgURL: pgURL, noEventLog: true})
	c := company{Sender: e.NewSender("statuses", 1_000_000), name: "statuses"}
	if events {
		c = e.newCompany("statuses-events")
	}
	// About 2.06 statuses a message: delivered, read, and the duplicates.
	n := int(float64(rate)*span.Seconds()/2.06) + 1
	plan := planStatuses(n, rate)
	total := plan.statuses()
	e.sentFixtures(c, n)
	t.Logf("%d sent messages; %d statuses in %d POSTs", n, total, len(plan.posts))

	rec := newStatusReceipts(n)
	e.recv.Observe = func(_, id string, body []byte, at time.Time) { rec.observe(id, body, at) }
	var gwEnv []string
	if *statusEnv != "" {
		gwEnv = strings.Split(*statusEnv, ",")
	}
	gp, gw := e.StartGateway(append([]string{"PARLEY_WEBHOOK_APP_SECRET=" + appSecret}, gwEnv...)...)
	roots := map[string]int{"gateway": gp.Pid(), "postgres": pgPid}
	if events {
		sp, _ := e.startSender()
		roots["webhook-sender"] = sp.Pid()
	}
	self := func() time.Duration {
		d, err := proccpu.Own(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, err := e.Pool.Exec(e.Ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()`); err != nil {
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
	t0 := time.Now().Add(-time.Minute).Unix()
	first := time.Now()
	var stopSample atomic.Bool
	if events {
		go func() {
			for !stopSample.Load() {
				time.Sleep(5 * time.Second)
				if !stopSample.Load() {
					t.Logf("  %s: %d of %d messages complete at the receiver", time.Since(first).Round(time.Second), rec.complete(), n)
				}
			}
		}()
	}
	results := plan.post(gw, c.Acct.PhoneNumberID, c.Acct.WABAID, t0, rate)
	posted := time.Since(first)
	deadline := time.Now().Add(5 * time.Minute)
	for events && rec.complete() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stopSample.Store(true)
	cpu1, err := proccpu.Tree(roots)
	if err != nil {
		t.Fatal(err)
	}
	cpu := map[string]time.Duration{"test process (load, receiver, embedded nats-server)": self() - self0}
	for k, v := range cpu1 {
		cpu[k] = v - cpu0[k]
	}
	time.Sleep(2 * time.Second) // a late duplicate would show
	e.report(t, plan, results, rec, reportInput{first: first, posted: posted, total: total, rate: rate, cpu: cpu, gw: gw, events: events})
	time.Sleep(pgwrites.Settle) // idle backends report their counters
	pg1, err := pgwrites.Read(e.Ctx, e.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("  %s (the whole run, every writer's)", pg1.Minus(pg0).Per(total, "status"))
	e.topStatements(t, total)
}

// topStatements prints where PostgreSQL's time went: the statements of
// the run by total execution time (pg_stat_statements, lock waits
// included), per status.
func (e *env) topStatements(t *testing.T, total int) {
	rows, err := e.Pool.Query(e.Ctx, `
		SELECT calls, total_exec_time, total_plan_time, rows, regexp_replace(left(query, 80), '\s+', ' ', 'g')
		FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 12`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	t.Logf("  PostgreSQL's statements by time (pg_stat_statements, lock waits included; execution + planning µs per status, calls, rows):")
	for rows.Next() {
		var calls, n int64
		var exec, plan float64
		var q string
		if err := rows.Scan(&calls, &exec, &plan, &n, &q); err != nil {
			t.Fatal(err)
		}
		t.Logf("    %7.1f + %5.1f µs  %7d calls %9d rows  %s", exec*1000/float64(total), plan*1000/float64(total), calls, n, q)
	}
}

// reportInput is what the run measured besides the receipts.
type reportInput struct {
	first  time.Time
	posted time.Duration
	total  int
	rate   int
	cpu    map[string]time.Duration
	gw     string
	events bool
}

// receipts checks what the receiver got per message: it returns the
// messages lost (an event missing), the events received more than once,
// those backwards (a delivered written after its read, or changed later),
// each event's latency from the first POST that carried its status, and
// the last receipt.
func (rec *statusReceipts) check(plan statusPlan, results []postResult) (lost, dups, backwards int, lat []float64, last time.Time) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	lat = make([]float64, 0, 2*plan.messages)
	for i := range plan.messages {
		if rec.delivered[i] == 0 || rec.read[i] == 0 {
			lost++
			continue
		}
		dups += int(rec.delivered[i]-1) + int(rec.read[i]-1)
		if rec.deliveredID[i] > rec.readID[i] || rec.deliveredCh[i].After(rec.readCh[i]) {
			backwards++
		}
		for _, x := range []struct {
			at   time.Time
			post int32
		}{{rec.deliveredAt[i], plan.firstAny[i]}, {rec.readAt[i], plan.firstRead[i]}} {
			lat = append(lat, float64(x.at.Sub(results[x.post].start).Microseconds())/1000)
			if x.at.After(last) {
				last = x.at
			}
		}
	}
	return lost, dups, backwards, lat, last
}

// report prints the figures and fails the bench on a missed target.
// Without events, a status is applied when the gateway answers 200 (its
// group is committed), and the latency is the POST's.
func (e *env) report(t *testing.T, plan statusPlan, results []postResult, rec *statusReceipts, in reportInput) {
	var lastAnswer time.Time
	retried, unanswered := 0, 0
	refusals := map[int]int{}
	answers := make([]float64, 0, len(results))
	for _, r := range results {
		if r.answered.IsZero() {
			unanswered++
		} else {
			answers = append(answers, float64(r.answered.Sub(r.start).Microseconds())/1000)
		}
		if r.answered.After(lastAnswer) {
			lastAnswer = r.answered
		}
		if len(r.refused) > 0 {
			retried++
		}
		for _, st := range r.refused {
			refusals[st]++
		}
	}
	lost, dups, backwards, lat, lastEvent := 0, 0, 0, answers, lastAnswer
	if in.events {
		lost, dups, backwards, lat, lastEvent = rec.check(plan, results)
	}
	applied := float64(in.total) / lastEvent.Sub(in.first).Seconds()
	answered := float64(in.total) / lastAnswer.Sub(in.first).Seconds()
	load := float64(in.total) / in.posted.Seconds()
	p50, p99, pmax := percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	t.Logf("POSTed %d statuses (%d messages) in %d POSTs over %s: %.0f statuses/s; %d POSTs answered other than 200 and retried %v, %d never answered 200",
		in.total, plan.messages, len(plan.posts), in.posted.Round(time.Millisecond), load, retried, refusals, unanswered)
	t.Logf("the gateway answered at %.0f statuses/s (%s), POST -> 200 p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		answered, lastAnswer.Sub(in.first).Round(time.Millisecond), percentile(answers, 0.5), percentile(answers, 0.99), percentile(answers, 1))
	if in.events {
		t.Logf("applied: %.0f statuses/s from the first POST to the last event at the receiver (%s)", applied, lastEvent.Sub(in.first).Round(time.Millisecond))
		t.Logf("at the receiver: %d messages, %d lost, %d duplicated, %d backwards, %d other events; POST -> event p50 %.1f ms, p99 %.1f ms, max %.1f ms",
			plan.messages, lost, dups, backwards, rec.other, p50, p99, pmax)
	}
	groups, grouped := gatewayGroups(t, in.gw)
	g := groups["committed"] + groups["failed"]
	t.Logf("gateway: %v groups (%v failed), %.0f statuses a group on average", g, groups["failed"], grouped/max(g, 1))
	names := slices.Sorted(maps.Keys(in.cpu))
	var parts []string
	var sum time.Duration
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(in.cpu[k].Microseconds())/float64(in.total)))
		sum += in.cpu[k]
	}
	t.Logf("CPU µs per status: %s; all %.1f (%d cores: %.2f cores busy)", strings.Join(parts, ", "),
		float64(sum.Microseconds())/float64(in.total), runtime.NumCPU(), sum.Seconds()/lastEvent.Sub(in.first).Seconds())
	var notRead int
	if err := e.Pool.QueryRow(e.Ctx, `SELECT count(*) FROM messages WHERE NOT (state = 'read' AND delivered_at <= read_at)`).Scan(&notRead); err != nil {
		t.Fatal(err)
	}
	if notRead != 0 || lost != 0 || dups != 0 || backwards != 0 || unanswered != 0 {
		t.Errorf("in the record %d messages not read after delivered; at the receiver lost %d, duplicated %d, backwards %d; %d POSTs never answered 200: want all 0",
			notRead, lost, dups, backwards, unanswered)
	}
	if applied < statusTarget {
		t.Errorf("target missed: %.0f statuses applied a second, want at least %d", applied, statusTarget)
	}
	if p99 >= float64(statusP99.Milliseconds()) {
		t.Errorf("target missed: p99 %.1f ms from the POST to the event, want under %s", p99, statusP99)
	}
	if load < 0.95*float64(in.rate) {
		t.Errorf("the load ran at %.0f statuses/s, under 95%% of %d/s: the figure is not the target's", load, in.rate)
	}
}
