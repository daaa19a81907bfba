//go:build drill

package cluster

// The cluster drill (make drill-cluster): Parley as a platform team runs
// it. Three nats-server processes (the pinned binary, PARLEY_NATS_SERVER)
// form a JetStream cluster on loopback, each with its own ports and store
// directory; the stream has 3 replicas; two gateways, two campaign
// dispatchers and two automation dispatchers run as separate processes,
// each told all three NATS URLs, with provider-sim standing in for the
// WhatsApp Cloud API. A 20,000-contact campaign (20 requests of 1000,
// alternating between the gateways) and a stream of automation triggers
// (200 of 5 contacts) run while the drill SIGKILLs the stream's leader,
// then one dispatcher of each kind, and restarts them. The same workload
// then runs on one process of each and one NATS server: it must reach the
// same recipients and leave every message in the same state.
//
// Counted at provider-sim per recipient (testkit/drilltally): lost
// must be 0, nothing may fail, duplicates stay within the sends the
// provider had taken but no dispatcher had recorded at each kill. Of the
// gateways' answers while the stream had no leader, every 202's contacts
// must be delivered and every 503 must carry Retry-After; the client
// retries a 503 with the same Idempotency-Key, as the README tells clients
// to.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/drilltally"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

const (
	clusterCampaignRequests = 20
	clusterCampaignSize     = 1000
	clusterCampaignEvery    = 400 * time.Millisecond
	clusterTriggers         = 200
	clusterTriggerSize      = 5
	clusterTriggerEvery     = 100 * time.Millisecond
	clusterRate             = 1000 // the account's throughput, messages per second
)

// clusterLease is the dispatchers' tuning in this drill: a killed
// dispatcher's rows are taken over after 4 s.
var clusterLease = []string{"PARLEY_DISPATCH_LEASE=4s", "PARLEY_DISPATCH_SWEEP_INTERVAL=500ms", "PARLEY_DISPATCH_ACK_WAIT=5s"}

// natsNode is one nats-server process of the drill's, with its ports and
// store directory; it can be killed and started again on the same ones.
type natsNode struct {
	name, conf               string
	client, cluster, monitor string
	bin                      string
	p                        *serviceproc.Process
}

// startNATS writes the configuration of n nodes (a cluster when n > 1)
// under a temporary directory and starts them. The directory and the
// processes go when the test ends.
func startNATS(t *testing.T, bin string, n int) []*natsNode {
	t.Helper()
	dir := t.TempDir()
	nodes := make([]*natsNode, n)
	for i := range nodes {
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), bin: bin,
			client: drillenv.FreeAddr(t), cluster: drillenv.FreeAddr(t), monitor: drillenv.FreeAddr(t)}
	}
	for _, nd := range nodes {
		var b strings.Builder
		fmt.Fprintf(&b, "server_name: %s\nlisten: %s\nhttp: %s\n", nd.name, nd.client, nd.monitor)
		// As deploy/nats/nats-server.conf: fsync before acknowledging.
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", filepath.Join(dir, nd.name))
		if n > 1 {
			var routes []string
			for _, o := range nodes {
				if o != nd {
					routes = append(routes, "nats-route://"+o.cluster)
				}
			}
			fmt.Fprintf(&b, "cluster {\n  name: parley-drill\n  listen: %s\n  routes: [%s]\n}\n", nd.cluster, strings.Join(routes, ", "))
		}
		nd.conf = filepath.Join(dir, nd.name+".conf")
		if err := os.WriteFile(nd.conf, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes {
		nd.start(t)
	}
	return nodes
}

// start runs the node; /varz answers before the cluster has a leader,
// which is what a node started alone must wait for.
func (nd *natsNode) start(t *testing.T) {
	t.Helper()
	p, err := serviceproc.Start(context.Background(), serviceproc.Options{Name: "nats " + nd.name, Bin: nd.bin,
		Args: []string{"-c", nd.conf}, Probe: "http://" + nd.monitor + "/varz", StartTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	nd.p = p
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
			t.Logf("--- last lines of nats %s ---\n%s", nd.name, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
}

func natsURLs(nodes []*natsNode) string {
	urls := make([]string, len(nodes))
	for i, nd := range nodes {
		urls[i] = "nats://" + nd.client
	}
	return strings.Join(urls, ",")
}

// buildGateway builds the gateway's binary once, beside the others.
func buildGateway(t *testing.T) string { return drillenv.Bin(t, "gateway") }

// attempt is one HTTP request of the load, as the client saw it.
type attempt struct {
	start, end time.Time
	status     int // 0: no answer (connection error)
	retryAfter string
	phones     []string
}

// loadClient sends the workload to the gateways and keeps every answer.
type loadClient struct {
	gateways []string
	key      string
	http     *http.Client

	mu       sync.Mutex
	attempts []attempt
	accepted []string // the contacts of every 202
	errs     []string
}

// send posts body until a gateway answers 202, alternating gateways from
// first, waiting Retry-After after a 503 or a 429 (1 s after a 409: the
// key's first request is still in flight, or its claim outlived a Redis
// timeout and expires within a minute) and retrying with the same
// Idempotency-Key; any other answer is an error of the drill.
func (c *loadClient) send(path, idem string, first int, body []byte, phones []string) {
	deadline := time.Now().Add(90 * time.Second)
	for try := 0; ; try++ {
		gw := c.gateways[(first+try)%len(c.gateways)]
		req, err := http.NewRequest(http.MethodPost, "http://"+gw+path, bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("service-api-key", c.key)
		req.Header.Set("Idempotency-Key", idem)
		a := attempt{start: time.Now(), phones: phones}
		resp, err := c.http.Do(req)
		var raw []byte
		if err == nil {
			raw, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		}
		a.end = time.Now()
		c.mu.Lock()
		c.attempts = append(c.attempts, a)
		switch {
		case a.status == http.StatusAccepted:
			var r struct {
				Contacts int `json:"contacts"`
			}
			if json.Unmarshal(raw, &r) != nil || r.Contacts != len(phones) {
				c.errs = append(c.errs, fmt.Sprintf("%s %s: 202 %s, want %d contacts", path, idem, raw, len(phones)))
			}
			c.accepted = append(c.accepted, phones...)
			c.mu.Unlock()
			return
		case a.status != 0 && a.status != http.StatusServiceUnavailable && a.status != http.StatusTooManyRequests && a.status != http.StatusConflict:
			c.errs = append(c.errs, fmt.Sprintf("%s %s: %d %s", path, idem, a.status, raw))
			c.mu.Unlock()
			return
		case time.Now().After(deadline):
			c.errs = append(c.errs, fmt.Sprintf("%s %s: no 202 within 90 s (last %d %v)", path, idem, a.status, err))
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		wait := 200 * time.Millisecond
		if a.status == http.StatusConflict {
			wait = time.Second
		}
		if s, err := strconv.Atoi(a.retryAfter); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		time.Sleep(wait)
	}
}

func (c *loadClient) acceptedNow() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.accepted)
}

func campaignPhone(i int) string   { return "+1415" + fmt.Sprintf("%07d", i) }
func automationPhone(i int) string { return "+1416" + fmt.Sprintf("%07d", i) }

// run sends the workload, paced, and returns when every request has its
// 202 (or its error).
func (c *loadClient) run(campaignID, automationID int64) {
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range clusterCampaignRequests {
			time.Sleep(time.Until(start.Add(time.Duration(i) * clusterCampaignEvery)))
			phones := make([]string, clusterCampaignSize)
			for j := range phones {
				phones[j] = campaignPhone(i*clusterCampaignSize + j)
			}
			body, _ := json.Marshal(map[string]any{"campaign_id": campaignID, "contacts": phones, "is_forced": true})
			c.send("/api/campaigns/send", fmt.Sprintf("drill-campaign-%d", i), i, body, phones)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range clusterTriggers {
			time.Sleep(time.Until(start.Add(time.Duration(i) * clusterTriggerEvery)))
			phones := make([]string, clusterTriggerSize)
			contacts := make([]map[string]any, clusterTriggerSize)
			for j := range phones {
				phones[j] = automationPhone(i*clusterTriggerSize + j)
				contacts[j] = map[string]any{"phone": phones[j], "first_name": "A" + strconv.Itoa(i)}
			}
			body, _ := json.Marshal(map[string]any{"automation_id": automationID, "contacts": contacts})
			c.send("/api/automations/send", fmt.Sprintf("drill-trigger-%d", i), i, body, phones)
		}
	}()
	wg.Wait()
}

// leaderChange is what the gateways answered while the stream had no
// leader: the requests under way between the kill and the election.
type leaderChange struct {
	killed, elected     string
	killedAt, electedAt time.Time
	answers             map[int]int // by status (0: no answer)
	without             int         // 503s without Retry-After
	phones202           []string    // contacts of the 202s in the window
	delivered202        int         // of which provider-sim received
	first202            time.Duration
}

// clusterOutcome is one run's result.
type clusterOutcome struct {
	tally      drilltally.Tally
	bound      int64
	states     map[string]string // phone -> message state
	recipients []string          // phones provider-sim received, sorted
	change     *leaderChange
	kills      []string
	attempts   map[int]int
	loadTook   time.Duration // from the first request to the last 202
	took       time.Duration
}

// runClusterWorkload runs the workload on replicas NATS nodes (3: two of
// each service and the kills; 1: one of each, nothing killed).
func runClusterWorkload(t *testing.T, natsBin, gwBin string, replicas int) clusterOutcome {
	began := time.Now()
	nodes := startNATS(t, natsBin, replicas)
	cfg := bustest.Config(natsURLs(nodes))
	cfg.StreamReplicas = replicas
	e := drillenv.New(t, drillenv.Options{BusCfg: &cfg, SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	stream, err := e.JS.Stream(e.Ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(e.Ctx); err != nil || info.Config.Replicas != replicas {
		t.Fatalf("stream %s: replicas %v (%v), want %d", cfg.Stream, info, err, replicas)
	}
	s := e.NewSender("cluster", clusterRate)
	key, _, err := apikey.NewStore(e.Pool, time.Now).Create(e.Ctx, s.Company.ID, apikey.Actor{Label: "cluster drill"})
	if err != nil {
		t.Fatal(err)
	}

	each := 1
	if replicas > 1 {
		each = 2
	}
	lc := &loadClient{key: key, http: &http.Client{Timeout: 10 * time.Second}}
	for i := range each {
		addr := drillenv.FreeAddr(t)
		drillenv.StartProc(t, fmt.Sprintf("gateway %d", i+1), gwBin, "http://"+addr+"/readyz", 30*time.Second,
			e.DispatcherEnv("PARLEY_GATEWAY_ADDR", addr, "PARLEY_GATEWAY_ACCESS_LOG=false", "PARLEY_LOG_LEVEL=warn")...)
		lc.gateways = append(lc.gateways, addr)
	}
	var campaigns, automations []*serviceproc.Process
	startAutomation := func() *serviceproc.Process {
		p, _ := e.StartDispatcher("automation-dispatcher", drillenv.Bins.Automation, "PARLEY_AUTOMATION_DISPATCHER_ADDR", clusterLease...)
		return p
	}
	for range each {
		p, _ := e.StartCampaign(clusterLease...)
		campaigns = append(campaigns, p)
		automations = append(automations, startAutomation())
	}

	loadDone := make(chan struct{})
	loadStart := time.Now()
	var loadTook time.Duration
	go func() { lc.run(s.Camp.ID, s.Auto.ID); loadTook = time.Since(loadStart); close(loadDone) }()
	since := func(at time.Time) string { return "+" + at.Sub(loadStart).Round(100*time.Millisecond).String() }

	out := clusterOutcome{attempts: map[int]int{}}
	take := func() drilltally.Tally {
		tl, err := drilltally.Take(e.Ctx, drilltally.Sim{URL: e.Sim.Base}, e.Pool, lc.acceptedNow())
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	if replicas > 1 {
		waitFor(t, "3 campaign requests accepted and 1000 sends at the provider", 60*time.Second, func() bool {
			return len(lc.acceptedNow()) >= 3*clusterCampaignSize && e.SimStats().Accepted >= 1000
		})
		// The stream's leader, SIGKILLed.
		info, err := stream.Info(e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			t.Fatalf("stream %s has no leader: %+v", cfg.Stream, info.Cluster)
		}
		ch := &leaderChange{killed: info.Cluster.Leader, answers: map[int]int{}}
		var leader *natsNode
		for _, nd := range nodes {
			if nd.name == ch.killed {
				leader = nd
			}
		}
		if leader == nil {
			t.Fatalf("stream leader %q is none of the drill's nodes", ch.killed)
		}
		// No sender dies with it: this kill adds nothing to the duplicate
		// bound, and a batch redelivered after it must not be sent twice.
		atKill := take()
		killedAt := time.Now()
		leader.p.Kill()
		waitFor(t, "a new stream leader", 60*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(e.Ctx, time.Second)
			defer cancel()
			info, err := stream.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != ch.killed {
				ch.elected = info.Cluster.Leader
				return true
			}
			return false
		})
		ch.killedAt, ch.electedAt = killedAt, time.Now()
		out.kills = append(out.kills, fmt.Sprintf("%s NATS stream leader %s SIGKILLed (%d contacts accepted, %d not yet final): %s seen as the new leader after %s; the killed node restarted on its store and current again",
			since(killedAt), ch.killed, atKill.Accepted, atKill.Accepted-atKill.Rows+atKill.Open, ch.elected, ch.electedAt.Sub(killedAt).Round(time.Millisecond)))
		// The killed node back, on its store: it catches up as a follower.
		leader.start(t)
		waitFor(t, "the restarted node current again", 60*time.Second, func() bool {
			info, err := stream.Info(e.Ctx)
			if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != replicas-1 {
				return false
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
			return true
		})
		out.change = ch
		// A restarted dispatcher creates or updates the stream, which needs
		// the cluster's meta leader: the stream's election does not imply it.
		waitFor(t, "the JetStream meta leader", 60*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(e.Ctx, time.Second)
			defer cancel()
			_, err := e.JS.AccountInfo(ctx)
			return err == nil
		})

		// Then one dispatcher of each kind, while messages are in flight.
		for _, k := range []struct {
			name  string
			procs []*serviceproc.Process
			start func() *serviceproc.Process
		}{
			{"campaign dispatcher", campaigns, func() *serviceproc.Process { p, _ := e.StartCampaign(clusterLease...); return p }},
			{"automation dispatcher", automations, startAutomation},
		} {
			killedAt := time.Now()
			k.procs[0].Kill()
			// Requests the provider had already taken finish on its side.
			time.Sleep(200 * time.Millisecond)
			tl := take()
			out.bound += int64(tl.Unrecorded)
			inFlight := tl.Accepted - tl.Rows + tl.Open
			out.kills = append(out.kills, fmt.Sprintf("%s %s 1 SIGKILLed: %d contacts accepted, %d not yet final (in flight), %d sends unrecorded; restarted",
				since(killedAt), k.name, tl.Accepted, inFlight, tl.Unrecorded))
			if inFlight == 0 {
				t.Errorf("%s killed with nothing in flight: the drill tested nothing", k.name)
			}
			k.procs[0] = k.start()
			time.Sleep(500 * time.Millisecond)
		}
		select {
		case <-loadDone:
			t.Errorf("the load had finished before the dispatcher kills were over: they tested nothing on the way in")
		default:
		}
	}
	<-loadDone
	out.loadTook = loadTook
	for _, msg := range lc.errs {
		t.Error(msg)
	}
	if t.Failed() {
		t.FailNow()
	}
	want := clusterCampaignRequests*clusterCampaignSize + clusterTriggers*clusterTriggerSize
	tl, err := drilltally.Settle(e.Ctx, drilltally.Sim{URL: e.Sim.Base}, e.Pool, lc.accepted, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out.tally = tl
	if tl.Accepted != want {
		t.Errorf("%d contacts accepted, the workload has %d", tl.Accepted, want)
	}
	for _, p := range tl.Problems(drilltally.Expect{DuplicateBound: out.bound}) {
		t.Error(p)
	}

	// What the gateways answered.
	for _, a := range lc.attempts {
		out.attempts[a.status]++
		if a.status == http.StatusServiceUnavailable && a.retryAfter == "" {
			t.Errorf("a 503 without Retry-After at %s", a.end.Format(time.RFC3339Nano))
		}
	}
	counts, err := drilltally.Sim{URL: e.Sim.Base}.Counts(e.Ctx, lc.accepted)
	if err != nil {
		t.Fatal(err)
	}
	if ch := out.change; ch != nil {
		// The requests under way at some moment between the kill and the
		// election.
		for _, a := range lc.attempts {
			if a.start.After(ch.electedAt) || a.end.Before(ch.killedAt) {
				continue
			}
			if a.status == http.StatusAccepted && a.start.After(ch.killedAt) && (ch.first202 == 0 || a.end.Sub(ch.killedAt) < ch.first202) {
				ch.first202 = a.end.Sub(ch.killedAt)
			}
			ch.answers[a.status]++
			if a.status == http.StatusServiceUnavailable && a.retryAfter == "" {
				ch.without++
			}
			if a.status == http.StatusAccepted {
				ch.phones202 = append(ch.phones202, a.phones...)
				for _, p := range a.phones {
					if counts[p] > 0 {
						ch.delivered202++
					}
				}
			}
		}
		if ch.delivered202 != len(ch.phones202) {
			t.Errorf("the 202s given during the leader change: %d contacts, %d delivered", len(ch.phones202), ch.delivered202)
		}
	}

	// Per recipient and per message, for the comparison between runs.
	out.states = map[string]string{}
	rows, err := e.Pool.Query(e.Ctx, `SELECT phone, state::text FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var phone, state string
		if err := rows.Scan(&phone, &state); err != nil {
			t.Fatal(err)
		}
		if prev, ok := out.states[phone]; ok {
			t.Errorf("two messages to %s (%s, %s)", phone, prev, state)
		}
		out.states[phone] = state
	}
	rows.Close()
	for p, n := range counts {
		if n > 0 {
			out.recipients = append(out.recipients, p)
		}
	}
	slices.Sort(out.recipients)
	out.recipients = slices.Compact(out.recipients)
	out.took = time.Since(began)
	return out
}

// waitFor polls cond every 100 ms until it holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterDrill is make drill-cluster. Not named TestDrill*: make drills
// (and CI) run those.
func TestClusterDrill(t *testing.T) {
	natsBin := os.Getenv("PARLEY_NATS_SERVER")
	if natsBin == "" {
		t.Fatal("PARLEY_NATS_SERVER is not set: run make drill-cluster (it builds the pinned nats-server into bin/)")
	}
	began := time.Now()
	gwBin := buildGateway(t)
	var cluster, single clusterOutcome
	if !t.Run("replicas", func(t *testing.T) { cluster = runClusterWorkload(t, natsBin, gwBin, 3) }) {
		t.FailNow()
	}
	if !t.Run("single", func(t *testing.T) { single = runClusterWorkload(t, natsBin, gwBin, 1) }) {
		t.FailNow()
	}
	if !slices.Equal(cluster.recipients, single.recipients) {
		t.Errorf("recipients differ: %d on the replicas, %d on one process of each", len(cluster.recipients), len(single.recipients))
	}
	if !maps.Equal(cluster.states, single.states) {
		diff := 0
		for p, s := range cluster.states {
			if single.states[p] != s {
				diff++
			}
		}
		t.Errorf("message states differ for %d phones (replicas %v, single %v)", diff, cluster.tally.States, single.tally.States)
	}
	printClusterDrill(cluster, single, time.Since(began))
}

func printClusterDrill(c, s clusterOutcome, took time.Duration) {
	fmt.Printf("\ncluster drill: 3 NATS nodes (stream R3), 2 gateways, 2 campaign dispatchers, 2 automation dispatchers, provider-sim\n")
	fmt.Printf("  workload: %d campaign requests of %d contacts, %d automation triggers of %d contacts, account %d/s\n",
		clusterCampaignRequests, clusterCampaignSize, clusterTriggers, clusterTriggerSize, clusterRate)
	for _, k := range c.kills {
		fmt.Printf("  %s\n", k)
	}
	if ch := c.change; ch != nil {
		fmt.Printf("  requests under way during the leader change (%s): gateway answers by status %v (0 = no answer), 503s without Retry-After %d; the 202s' contacts %d, delivered %d; first 202 of a request sent after the kill: +%s\n",
			ch.electedAt.Sub(ch.killedAt).Round(time.Millisecond), ch.answers, ch.without, len(ch.phones202), ch.delivered202, ch.first202.Round(time.Millisecond))
	}
	fmt.Printf("  +%s the load's last 202; all gateway answers by status: %v\n", c.loadTook.Round(100*time.Millisecond), c.attempts)
	fmt.Printf("  at provider-sim, per recipient: accepted %d, lost %d, duplicated %d (bound: %d unrecorded at the dispatcher kills), failed %d, states %v\n",
		c.tally.Accepted, c.tally.Lost, c.tally.Duplicates, c.bound, c.tally.Failed, c.tally.States)
	fmt.Printf("  run took %s\n", c.took.Round(time.Millisecond))
	fmt.Printf("one process of each, one NATS server (R1): accepted %d, lost %d, duplicated %d, states %v, answers %v, the load's last 202 at +%s; run took %s\n",
		s.tally.Accepted, s.tally.Lost, s.tally.Duplicates, s.tally.States, s.attempts, s.loadTook.Round(100*time.Millisecond), s.took.Round(time.Millisecond))
	fmt.Printf("same recipients (%d) and message states on both: %v\n", len(c.recipients),
		slices.Equal(c.recipients, s.recipients) && maps.Equal(c.states, s.states))
	fmt.Printf("cluster drill took %s\n", took.Round(time.Millisecond))
}
