package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/testkit/pgwrites"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// CapacityOptions are the knobs of make capacity.
type CapacityOptions struct {
	// NATSServer is the nats-server binary the private NATS runs.
	NATSServer string
	// PortBase: the private servers listen on PortBase+1..+4.
	PortBase int
	// Companies is how many companies the gateway phase's keys spread over.
	Companies int
	Conns     int
	Warmup    time.Duration
	Measure   time.Duration
	// Messages is the campaign phase's size, in requests of 1000 contacts,
	// one per company (so Messages/1000 numbers send at once).
	Messages int
	// AccountThroughput is each number's messages per second (WhatsApp's
	// default is 80), in Parley and at provider-sim.
	AccountThroughput int
	// Statuses makes provider-sim post sent, delivered and read for every
	// message to the gateway's webhook, as WhatsApp does.
	Statuses bool
	// Triggers is the automation phase's size: requests of one new contact
	// each (0: no automation phase).
	Triggers int
	Timeout  time.Duration
}

// usage is one phase's measurements: CPU by process, PostgreSQL's counters
// and JetStream's stream.
type usage struct {
	cpu    map[string]time.Duration
	pg     pgCounters
	stream int64 // messages in the stream
	bytes  int64
	wall   time.Duration
}

// pgCounters are PostgreSQL's write counters (testkit/pgwrites).
type pgCounters = pgwrites.Counters

func readPG(ctx context.Context, pool *pgxpool.Pool) (pgCounters, error) {
	return pgwrites.Read(ctx, pool)
}

// meter samples everything a phase is measured by.
type meter struct {
	roots  map[string]int
	pool   *pgxpool.Pool
	stream func(context.Context) (int64, int64, error)
}

func (m *meter) sample(ctx context.Context) (usage, error) {
	var u usage
	var err error
	if u.cpu, err = treeCPU(m.roots); err != nil {
		return u, err
	}
	if u.pg, err = readPG(ctx, m.pool); err != nil {
		return u, err
	}
	u.stream, u.bytes, err = m.stream(ctx)
	u.wall = time.Duration(time.Now().UnixNano())
	return u, err
}

func (u usage) minus(o usage) usage {
	d := usage{cpu: map[string]time.Duration{}, pg: u.pg.Minus(o.pg), stream: u.stream - o.stream, bytes: u.bytes - o.bytes, wall: u.wall - o.wall}
	for k, v := range u.cpu {
		d.cpu[k] = v - o.cpu[k]
	}
	return d
}

// pgStatsSettle is how long a PostgreSQL backend may keep its counters
// before reporting them when idle (PGSTAT_IDLE_INTERVAL, 10 s, plus a margin).
const pgStatsSettle = pgwrites.Settle

// processOrder is the order of the report's columns.
var processOrder = []string{"gateway", "campaign-dispatcher", "automation-dispatcher", "nats-server", "redis-server", "postgres", "provider-sim"}

// report prints a phase's figures per unit (request or message).
func (u usage) report(w io.Writer, title string, units int, unit string) {
	n := float64(max(units, 1))
	fmt.Fprintf(w, "%s: %d %ss in %.1f s = %.0f %ss/s (wall, shared machine)\n", title, units, unit, u.wall.Seconds(), float64(units)/u.wall.Seconds(), unit)
	var parts []string
	var parley time.Duration
	for _, p := range processOrder {
		c, ok := u.cpu[p]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", p, float64(c.Microseconds())/n))
		if p != "provider-sim" {
			parley += c
		}
	}
	fmt.Fprintf(w, "  CPU µs per %s: %s; Parley's side (all but provider-sim) %.1f = %.0f %ss per core-second\n",
		unit, strings.Join(parts, ", "), float64(parley.Microseconds())/n, n/parley.Seconds(), unit)
	for _, p := range processOrder {
		if c, ok := u.cpu[p]; ok && c > 0 && p != "provider-sim" {
			fmt.Fprintf(w, "  %s alone: %.0f %ss per core-second (CPU %.2f s)\n", p, n/c.Seconds(), unit, c.Seconds())
		}
	}
	fmt.Fprintf(w, "  %s\n", u.pg.Per(units, unit))
	if u.stream > 0 {
		fmt.Fprintf(w, "  JetStream: %d messages stored (%.0f bytes each)\n", u.stream, float64(u.bytes)/float64(u.stream))
	} else {
		fmt.Fprintf(w, "  JetStream: %d messages removed (acknowledged batches)\n", -u.stream)
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// Capacity measures the CPU each process spends per gateway request, per
// campaign message sent and per automation trigger, and PostgreSQL's writes
// per message, on private servers, and writes the report to w
// (docs/capacity.md explains the phases). Any error answer, lost or
// duplicated message fails it.
func Capacity(ctx context.Context, o CapacityOptions, w io.Writer) error {
	if o.Messages%1000 != 0 || o.Messages < 1000 || o.Messages/1000 > o.Companies {
		return fmt.Errorf("-messages must be a multiple of 1000, at most 1000 x -companies")
	}
	fmt.Fprintf(w, "capacity run %s, %d CPUs, load average %s\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), loadAvg())
	srv, err := startPrivateServers(ctx, o.NATSServer, o.PortBase)
	if err != nil {
		return err
	}
	defer srv.stop()
	roots, err := srv.pids()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "private servers: nats-server %s (sync_interval always), redis-server %s, PostgreSQL on 127.0.0.1:%d (defaults: fsync on)\n",
		srv.natsURL, srv.redisAddr, srv.pgPort)
	sc, err := newScratchAt(ctx, "capacity", o.Companies, w, srv.pgAdminURL, srv.redisAddr, srv.natsURL)
	if err != nil {
		return err
	}
	defer sc.close()
	pool := sc.pool
	busCfg := sc.bus("capacity")
	stream, err := bus.EnsureStream(ctx, sc.js, busCfg)
	if err != nil {
		return err
	}
	m := &meter{roots: roots, pool: pool, stream: func(ctx context.Context) (int64, int64, error) {
		info, err := stream.Info(ctx)
		if err != nil {
			return 0, 0, err
		}
		return int64(info.State.Msgs), int64(info.State.Bytes), nil
	}}

	// Every number at the chosen throughput, in Parley and at provider-sim.
	if _, err := pool.Exec(ctx, `UPDATE messaging_accounts SET throughput_per_second = $1`, o.AccountThroughput); err != nil {
		return err
	}
	var accounts []string
	rows, err := pool.Query(ctx, `SELECT phone_number_id FROM messaging_accounts`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		accounts = append(accounts, fmt.Sprintf("%s:bench-token:%d", id, o.AccountThroughput))
	}
	if err := rows.Err(); err != nil {
		return err
	}

	// An API automation per company, on its campaign's template and number.
	if _, err := pool.Exec(ctx, `INSERT INTO automations (company_id, name, type, active, template_id, messaging_account_id)
		SELECT company_id, 'capacity', 'api', true, template_id, messaging_account_id FROM campaigns`); err != nil {
		return err
	}
	// PostgreSQL's backends report their counters at most once a second,
	// and an idle one up to 10 s later: the connections that provisioned
	// are closed (which reports them) and the meter has its own.
	sc.pool.Close()
	if pool, err = pgxpool.New(ctx, sc.dbURL); err != nil {
		return err
	}
	defer pool.Close()
	m.pool = pool

	dir, err := os.MkdirTemp("", "parley-capacity-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins := map[string]string{}
	for _, name := range []string{"gateway", "campaign-dispatcher", "automation-dispatcher", "provider-sim"} {
		bins[name] = filepath.Join(dir, name)
		if err := serviceproc.BuildService(ctx, name, bins[name], os.Stderr); err != nil {
			return err
		}
	}
	addrs := map[string]string{}
	for _, name := range []string{"gateway", "campaign-dispatcher", "automation-dispatcher", "provider-sim"} {
		if addrs[name], err = serviceproc.FreeAddr(); err != nil {
			return err
		}
	}
	const appSecret = "capacity-app-secret"
	env := sc.env(busCfg)
	gw, err := serviceproc.Start(ctx, serviceproc.Options{Name: "gateway", Bin: bins["gateway"],
		Env:   append(slices.Clone(env), "PARLEY_GATEWAY_ADDR="+addrs["gateway"], "PARLEY_GATEWAY_ACCESS_LOG=false", "PARLEY_WEBHOOK_APP_SECRET="+appSecret),
		Probe: "http://" + addrs["gateway"] + "/readyz", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = gw.Stop() }()
	roots["gateway"] = gw.Pid()
	simEnv := []string{"PARLEY_PROVIDER_SIM_ADDR=" + addrs["provider-sim"], "PARLEY_LOG_LEVEL=warn",
		"PARLEY_PROVIDER_SIM_ACCOUNTS=" + strings.Join(accounts, ","), fmt.Sprintf("PARLEY_PROVIDER_SIM_THROUGHPUT=%d", o.AccountThroughput),
		fmt.Sprintf("PARLEY_PROVIDER_SIM_MAX_RECIPIENTS=%d", 2*(o.Messages+o.Triggers)), fmt.Sprintf("PARLEY_PROVIDER_SIM_CALLBACK_QUEUE=%d", 4*(o.Messages+o.Triggers))}
	if o.Statuses {
		simEnv = append(simEnv, "PARLEY_PROVIDER_SIM_CALLBACK_URL=http://"+addrs["gateway"]+"/webhooks/whatsapp",
			"PARLEY_PROVIDER_SIM_APP_SECRET="+appSecret, "PARLEY_PROVIDER_SIM_SENT_DELAY=50ms",
			"PARLEY_PROVIDER_SIM_DELIVERED_DELAY=200ms", "PARLEY_PROVIDER_SIM_READ_DELAY=500ms")
	}
	sim, err := serviceproc.Start(ctx, serviceproc.Options{Name: "provider-sim", Bin: bins["provider-sim"], Env: simEnv,
		Probe: "http://" + addrs["provider-sim"] + "/_sim/stats", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = sim.Stop() }()
	roots["provider-sim"] = sim.Pid()

	// 1 and 2. The gateway at 10 and at 1000 contacts per request: CPU per
	// accepted request. The stream is purged after each.
	fmt.Fprintf(w, "load: %s warm-up, %s measured, %d companies\n", o.Warmup, o.Measure, o.Companies)
	for i, p := range []struct {
		contacts, conns int
	}{{10, o.Conns}, {1000, max(1, o.Conns/8)}} {
		time.Sleep(pgStatsSettle)
		var before, after usage
		var sampleErr error
		window := func(open bool) {
			u, err := m.sample(ctx)
			if err != nil {
				sampleErr = err
			}
			if open {
				before = u
			} else {
				after = u
			}
		}
		res, err := runWindow(ctx, addrs["gateway"], "/api/campaigns/send", CampaignRequests(sc.tenants, p.contacts), p.conns, o.Warmup, o.Measure, gw.Pid(), window)
		if err != nil {
			return fmt.Errorf("gateway at %d contacts: %w", p.contacts, err)
		}
		if sampleErr != nil {
			return sampleErr
		}
		fmt.Fprintf(w, "gateway, %d contacts per request, %d connections: %s\n", p.contacts, p.conns, res)
		if res.Errors > 0 || len(res.Statuses) != 1 || res.Statuses[202] == 0 {
			return fmt.Errorf("gateway at %d contacts: statuses %v, %d errors: every request must be a 202", p.contacts, res.Statuses, res.Errors)
		}
		d := after.minus(before)
		d.report(w, fmt.Sprintf("phase %d, POST /api/campaigns/send with %d contacts", i+1, p.contacts), res.Requests, "request")
		// The 202s are in the stream: its batches (in groups, since the
		// gateway's group commit) cover the measured requests and the
		// warm-up's, none twice.
		batches, msgs, err := streamBatchIDs(ctx, sc.js, busCfg.Stream)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  the stream holds %d batches in %d messages (warm-up included)\n", len(batches), msgs)
		if len(batches) < res.Requests {
			return fmt.Errorf("the stream holds %d batches for %d accepted requests", len(batches), res.Requests)
		}
		if err := stream.Purge(ctx); err != nil {
			return err
		}
	}

	// The campaign: one 1000-contact request per company, not measured.
	requests := o.Messages / 1000
	c, err := dial(addrs["gateway"])
	if err != nil {
		return err
	}
	var buf []byte
	for i, r := range CampaignRequests(sc.tenants[:requests], 1000) {
		buf = appendRequest(buf[:0], addrs["gateway"], "/api/campaigns/send", r)
		status, err := c.do(buf)
		if err != nil {
			c.close()
			return fmt.Errorf("campaign request %d: %w", i, err)
		}
		if status != http.StatusAccepted {
			c.close()
			return fmt.Errorf("campaign request %d: status %d", i, status)
		}
	}
	c.close()
	fmt.Fprintf(w, "campaign: %d requests of 1000 contacts accepted, one per company and number\n", requests)

	// 3. The campaign dispatcher sends them; provider-sim posts the
	// statuses back to the gateway.
	ph, err := startPhase(ctx, m, pool)
	if err != nil {
		return err
	}
	disp, err := serviceproc.Start(ctx, serviceproc.Options{Name: "campaign-dispatcher", Bin: bins["campaign-dispatcher"],
		Env: append(slices.Clone(env), "PARLEY_CAMPAIGN_DISPATCHER_ADDR="+addrs["campaign-dispatcher"],
			"PARLEY_WHATSAPP_BASE_URL=http://"+addrs["provider-sim"]),
		Probe: "http://" + addrs["campaign-dispatcher"] + "/readyz", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = disp.Stop() }()
	roots["campaign-dispatcher"] = disp.Pid()
	// A new process: all its CPU counts (before has none for it).
	e, err := ph.end(ctx, o, "http://"+addrs["provider-sim"], "campaign", o.Messages, 0, o.Messages)
	if err != nil {
		return err
	}
	st, sentAt, done, final := e.st, e.sentAt, e.done, e.final
	fmt.Fprintf(w, "phase 3, the campaign dispatcher: %d numbers at %d/s each, %d messages: all accepted by provider-sim %.1f s after the dispatcher's start (%.0f msg/s), all %s in PostgreSQL after %.1f s; provider-sim: 0 errors, 0 duplicated, %d statuses posted in %d webhook POSTs\n",
		requests, o.AccountThroughput, o.Messages, sentAt.Seconds(), float64(o.Messages)/sentAt.Seconds(), final, done.Seconds(), st.Callbacks.Statuses, st.Callbacks.Posts)
	if err := ph.report(ctx, w, e, "phase 3 per message (sent, and "+map[bool]string{true: "sent/delivered/read callbacks through the gateway", false: "no status callbacks"}[o.Statuses]+")", o.Messages, "message"); err != nil {
		return err
	}
	if err := disp.Stop(); err != nil {
		return fmt.Errorf("campaign dispatcher: %w", err)
	}
	delete(roots, "campaign-dispatcher")

	// 4. Automation triggers, one contact each, through the gateway, the
	// automation dispatcher, provider-sim and the callbacks: CPU per
	// trigger from the request to the message read.
	if o.Triggers > 0 {
		if err := automationPhase(ctx, o, w, m, roots, pool, addrs, bins, env, sc.tenants); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "load average at the end: %s\n", loadAvg())
	return nil
}

// automationPhase is phase 4: o.Triggers requests of one new contact each,
// spread over the companies' automations, from o.Conns connections.
func automationPhase(ctx context.Context, o CapacityOptions, w io.Writer, m *meter, roots map[string]int, pool *pgxpool.Pool,
	addrs, bins map[string]string, env []string, tenants []Tenant) error {
	autos := map[int64]int64{}
	rows, err := pool.Query(ctx, `SELECT company_id, id FROM automations`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c, a int64
		if err := rows.Scan(&c, &a); err != nil {
			return err
		}
		autos[c] = a
	}
	if err := rows.Err(); err != nil {
		return err
	}
	reqs := make([]Request, o.Triggers)
	for i := range reqs {
		t := tenants[i%len(tenants)]
		reqs[i] = Request{Key: t.Key, Contacts: 1,
			Body: []byte(fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"+44%010d","first_name":"T%d"}]}`, autos[t.CompanyID], 7000000000+i, i))}
	}
	disp, err := serviceproc.Start(ctx, serviceproc.Options{Name: "automation-dispatcher", Bin: bins["automation-dispatcher"],
		Env: append(slices.Clone(env), "PARLEY_AUTOMATION_DISPATCHER_ADDR="+addrs["automation-dispatcher"],
			"PARLEY_WHATSAPP_BASE_URL=http://"+addrs["provider-sim"]),
		Probe: "http://" + addrs["automation-dispatcher"] + "/readyz", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = disp.Stop() }()
	roots["automation-dispatcher"] = disp.Pid()
	var sim0 whatsappsim.Stats
	if err := getJSON(ctx, "http://"+addrs["provider-sim"]+"/_sim/stats", &sim0); err != nil {
		return err
	}
	ph, err := startPhase(ctx, m, pool)
	if err != nil {
		return err
	}
	statuses, errs, err := sendAll(ctx, addrs["gateway"], "/api/automations/send", reqs, o.Conns)
	if err != nil {
		return err
	}
	accepted := time.Since(ph.start)
	if errs > 0 || len(statuses) != 1 || statuses[http.StatusAccepted] != o.Triggers {
		return fmt.Errorf("automation triggers: statuses %v, %d errors: every request must be a 202", statuses, errs)
	}
	e, err := ph.end(ctx, o, "http://"+addrs["provider-sim"], "automation", o.Triggers, sim0.Accepted, o.Messages+o.Triggers)
	if err != nil {
		return err
	}
	st, sentAt, done, final := e.st, e.sentAt, e.done, e.final
	fmt.Fprintf(w, "phase 4, automation triggers: %d requests of one new contact from %d connections, all 202 in %.1f s (%.0f/s); all accepted by provider-sim after %.1f s, all %s after %.1f s; %d statuses posted in %d webhook POSTs\n",
		o.Triggers, o.Conns, accepted.Seconds(), float64(o.Triggers)/accepted.Seconds(), sentAt.Seconds(), final, done.Seconds(),
		st.Callbacks.Statuses-sim0.Callbacks.Statuses, st.Callbacks.Posts-sim0.Callbacks.Posts)
	return ph.report(ctx, w, e, "phase 4 per trigger (request, contact upsert, send"+map[bool]string{true: ", sent/delivered/read callbacks", false: ""}[o.Statuses]+")", o.Triggers, "trigger")
}

// phase is a measured phase of the capacity run that ends when its
// messages are final: what was read at its start.
type phase struct {
	m            *meter
	pool         *pgxpool.Pool
	tablesBefore map[string][4]int64
	before       usage
	start        time.Time
}

// startPhase waits until PostgreSQL's counters have settled, then reads
// them, the tables' writes and every process's CPU.
func startPhase(ctx context.Context, m *meter, pool *pgxpool.Pool) (*phase, error) {
	time.Sleep(pgStatsSettle)
	p := &phase{m: m, pool: pool}
	var err error
	if p.tablesBefore, err = tableWrites(ctx, pool); err != nil {
		return nil, err
	}
	if p.before, err = m.sample(ctx); err != nil {
		return nil, err
	}
	p.start = time.Now()
	return p, nil
}

// phaseEnd is what a phase measured.
type phaseEnd struct {
	st           whatsappsim.Stats
	sentAt, done time.Duration
	final        string // the state every message reached
	d            usage  // from the start to done
	cpu, idle    map[string]time.Duration
}

// end waits until want messages of lane are final (sent, or read with the
// status callbacks; base: provider-sim's accepted sends before the phase),
// reads the CPU at once and PostgreSQL's counters once every backend has
// reported, and fails unless provider-sim saw total sends in all, with no
// error and no duplicate.
func (p *phase) end(ctx context.Context, o CapacityOptions, sim, lane string, want int, base int64, total int) (phaseEnd, error) {
	e := phaseEnd{final: "sent"}
	if o.Statuses {
		e.final = "read"
	}
	var err error
	if e.st, e.sentAt, err = waitSent(ctx, sim, p.pool, lane, e.final, want, base, o.Statuses, o.Timeout, p.start); err != nil {
		return e, err
	}
	e.done = time.Since(p.start)
	if e.cpu, err = treeCPU(p.m.roots); err != nil {
		return e, err
	}
	time.Sleep(pgStatsSettle)
	after, err := p.m.sample(ctx)
	if err != nil {
		return e, err
	}
	e.idle = after.cpu
	after.cpu, after.wall = e.cpu, p.before.wall+e.done
	if err := simClean(e.st, total); err != nil {
		return e, err
	}
	e.d = after.minus(p.before)
	return e, nil
}

// report prints a phase's figures per unit, its tables' writes and the
// CPU while idle after it.
func (p *phase) report(ctx context.Context, w io.Writer, e phaseEnd, title string, units int, unit string) error {
	e.d.report(w, title, units, unit)
	if err := tableReport(ctx, w, p.pool, p.tablesBefore, units); err != nil {
		return err
	}
	idleReport(w, e.cpu, e.idle)
	return nil
}

// idleReport prints the CPU each process used per second while idle: from
// the end of a phase (at) to the PostgreSQL reading pgStatsSettle later
// (to): the dispatchers' polling and the servers' housekeeping, a cost
// per second rather than per message.
func idleReport(w io.Writer, at, to map[string]time.Duration) {
	var parts []string
	for _, p := range processOrder {
		if _, ok := to[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", p, float64((to[p]-at[p]).Microseconds())/1000/pgStatsSettle.Seconds()))
		}
	}
	fmt.Fprintf(w, "  idle for %s after the phase, CPU ms per second: %s\n", pgStatsSettle, strings.Join(parts, ", "))
}

// sendAll sends every request once from conns connections and counts the
// statuses and connection errors.
func sendAll(ctx context.Context, addr, path string, reqs []Request, conns int) (map[int]int, int, error) {
	type tally struct {
		statuses map[int]int
		errs     int
		err      error
	}
	out := make([]tally, conns)
	done := make(chan struct{})
	for i := range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			t := tally{statuses: map[int]int{}}
			defer func() { out[i] = t }()
			c, err := dial(addr)
			if err != nil {
				t.err = err
				return
			}
			defer func() { c.close() }()
			var buf []byte
			for j := i; j < len(reqs) && ctx.Err() == nil; j += conns {
				buf = appendRequest(buf[:0], addr, path, reqs[j])
				status, err := c.do(buf)
				if err != nil {
					t.errs++
					c.close()
					if c, err = dial(addr); err != nil {
						t.err = err
						return
					}
					continue
				}
				t.statuses[status]++
			}
		}()
	}
	statuses, errs := map[int]int{}, 0
	var all []error
	for range conns {
		<-done
	}
	for _, t := range out {
		errs += t.errs
		all = append(all, t.err)
		for s, n := range t.statuses {
			statuses[s] += n
		}
	}
	return statuses, errs, errors.Join(all...)
}

// waitSent waits until provider-sim accepted want sends more than base and
// every one of the lane's messages is in state final (with the callbacks
// posted when statuses), and returns the stats and when the last send was
// accepted (since start).
func waitSent(ctx context.Context, sim string, pool *pgxpool.Pool, lane, final string, want int, base int64, statuses bool,
	timeout time.Duration, start time.Time) (whatsappsim.Stats, time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var st whatsappsim.Stats
	var sentAt time.Duration
	for {
		if err := getJSON(ctx, sim+"/_sim/stats", &st); err != nil {
			return st, 0, err
		}
		if st.Accepted-base >= int64(want) && sentAt == 0 {
			sentAt = time.Since(start)
		}
		if sentAt > 0 && (!statuses || st.Callbacks.Statuses >= 3*(base+int64(want))) {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE lane = $1 AND state = $2`, lane, final).Scan(&n); err != nil {
				return st, 0, err
			}
			if n == want {
				return st, sentAt, nil
			}
		}
		if time.Now().After(deadline) {
			return st, 0, fmt.Errorf("after %s: provider accepted %d of %d, statuses posted %d, errors %v", timeout, st.Accepted-base, want, st.Callbacks.Statuses, st.Errors)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// simClean fails unless provider-sim accepted exactly total sends, each to
// a recipient of its own, without errors or dropped callbacks.
func simClean(st whatsappsim.Stats, total int) error {
	if st.Accepted != int64(total) || st.DuplicateRecipients != 0 || st.UntrackedSends != 0 || len(st.Errors) != 0 ||
		st.Callbacks.DroppedQueueFull != 0 || st.Callbacks.DroppedGaveUp != 0 || st.Callbacks.FailedPosts != 0 {
		return fmt.Errorf("provider-sim: accepted %d of %d, duplicated recipients %d, untracked %d, errors %v, callbacks %+v",
			st.Accepted, total, st.DuplicateRecipients, st.UntrackedSends, st.Errors, st.Callbacks)
	}
	return nil
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(url + ": " + resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// tableWrites is every table's cumulative inserted, updated (HOT ones
// apart) and deleted rows.
func tableWrites(ctx context.Context, pool *pgxpool.Pool) (map[string][4]int64, error) {
	rows, err := pool.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][4]int64{}
	for rows.Next() {
		var name string
		var v [4]int64
		if err := rows.Scan(&name, &v[0], &v[1], &v[2], &v[3]); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, rows.Err()
}

// tableReport prints each table's writes per message since before, and
// the size of the messages table (heap and indexes) per row.
func tableReport(ctx context.Context, w io.Writer, pool *pgxpool.Pool, before map[string][4]int64, messages int) error {
	after, err := tableWrites(ctx, pool)
	if err != nil {
		return err
	}
	n := float64(messages)
	var names []string
	for name := range after {
		names = append(names, name)
	}
	slices.Sort(names)
	var parts []string
	for _, name := range names {
		a, b := after[name], before[name]
		if a == b {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3f ins, %.3f upd (%.3f HOT), %.3f del", name,
			float64(a[0]-b[0])/n, float64(a[1]-b[1])/n, float64(a[2]-b[2])/n, float64(a[3]-b[3])/n))
	}
	fmt.Fprintf(w, "  rows written per message by table: %s\n", strings.Join(parts, "; "))
	var rowsN, heap, idx int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM messages),
		sum(pg_relation_size(p.relid))::bigint, sum(pg_indexes_size(p.relid))::bigint
		FROM pg_partition_tree('messages') p WHERE p.isleaf`).Scan(&rowsN, &heap, &idx); err != nil {
		return err
	}
	fmt.Fprintf(w, "  messages table: %d rows, %.0f bytes per row in the heap and %.0f in its indexes (after the updates, before any vacuum)\n",
		rowsN, float64(heap)/float64(max(rowsN, 1)), float64(idx)/float64(max(rowsN, 1)))
	return nil
}
