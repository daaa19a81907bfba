package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// The end-to-end test of the Sends pages runs the real campaign dispatcher
// and provider-sim (built once per test binary, like the gateway) beside
// the admin app and a gateway: a campaign accepted by the gateway is sent
// to provider-sim, shows under way in the console, is cancelled from the
// console, and provider-sim never receives a cancelled message.

var serviceBuilds struct {
	sync.Mutex
	dirs []string
	bins map[string]func() (string, error)
}

// serviceBinary builds the program in ../<pkg> (a service folder, or a
// command of one) once per test binary.
func serviceBinary(t *testing.T, pkg string) string {
	t.Helper()
	serviceBuilds.Lock()
	if serviceBuilds.bins == nil {
		serviceBuilds.bins = map[string]func() (string, error){}
	}
	name := filepath.Base(pkg)
	build, ok := serviceBuilds.bins[pkg]
	if !ok {
		build = sync.OnceValues(func() (string, error) {
			dir, err := os.MkdirTemp("", "parley-admin-test-"+name+"-")
			if err != nil {
				return "", err
			}
			serviceBuilds.Lock()
			serviceBuilds.dirs = append(serviceBuilds.dirs, dir)
			serviceBuilds.Unlock()
			bin := filepath.Join(dir, name)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := serviceproc.BuildService(ctx, name, bin, &out); err != nil {
				return "", fmt.Errorf("%w\n%s", err, out.String())
			}
			return bin, nil
		})
		serviceBuilds.bins[pkg] = build
	}
	serviceBuilds.Unlock()
	bin, err := build()
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return bin
}

func removeServiceBuilds() {
	serviceBuilds.Lock()
	defer serviceBuilds.Unlock()
	for _, d := range serviceBuilds.dirs {
		_ = os.RemoveAll(d)
	}
}

// privateAddr is a loopback address in this test's port range (7500-7599)
// that nobody listens on now.
func privateAddr(t *testing.T) string {
	t.Helper()
	for port := 7500; port < 7600; port++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return l.Addr().String()
	}
	t.Fatal("no free port in 7500-7599")
	return ""
}

// startService runs a built service until the test ends.
func startService(t *testing.T, name, bin, probe string, env ...string) *serviceproc.Process {
	t.Helper()
	p, err := serviceproc.Start(context.Background(), serviceproc.Options{Name: name, Bin: bin, Env: env, Probe: probe, StartTimeout: time.Minute})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%s: %v; its output ends:\n%s", name, err, p.Logs())
		}
	})
	return p
}

func httpJSON(t *testing.T, method, u string, body any, out any, headers ...string) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, u, res.StatusCode, raw, err)
		}
	}
	return res.StatusCode
}

// eventually polls cond every 50 ms until it holds or within passes.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConsoleSendsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway, the campaign dispatcher and provider-sim")
	}
	e := newEnv(t, nil)
	e.Clock.Set(time.Now().UTC())
	ctx := context.Background()
	gw := e.startGateway()
	dispatcherBin := serviceBinary(t, "dispatcher/cmd/campaign-dispatcher")
	simBin := serviceBinary(t, "provider-sim")

	// The gateway's account is served by provider-sim at 20 messages a
	// second, with status callbacks to the gateway: a 400-contact campaign
	// takes 20 s, long enough to be seen under way and cancelled.
	var pnid, token string
	if err := e.Pool.QueryRow(ctx, `UPDATE messaging_accounts SET throughput_per_second = 20 WHERE company_id = $1 RETURNING phone_number_id`,
		e.CompanyID).Scan(&pnid); err != nil {
		t.Fatal(err)
	}
	token = "test-token"
	simAddr := privateAddr(t)
	sim := "http://" + simAddr
	startService(t, "provider-sim", simBin, sim+"/_sim/stats",
		"PARLEY_PROVIDER_SIM_ADDR="+simAddr,
		"PARLEY_PROVIDER_SIM_ACCOUNTS="+pnid+":"+token+":20",
		"PARLEY_PROVIDER_SIM_CALLBACK_URL="+gw.url+"/webhooks/whatsapp",
		"PARLEY_PROVIDER_SIM_APP_SECRET="+whatsapp.DevAppSecret,
		"PARLEY_PROVIDER_SIM_SENT_DELAY=10ms", "PARLEY_PROVIDER_SIM_DELIVERED_DELAY=100ms", "PARLEY_PROVIDER_SIM_READ=false",
		"PARLEY_LOG_LEVEL=warn")
	e.startCampaignDispatcher(t, dispatcherBin, gw, sim)

	full, _, err := e.Keys.Create(ctx, e.CompanyID, apikey.Actor{Label: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	const contacts = 400
	phones := make([]string, contacts)
	for i := range phones {
		phones[i] = fmt.Sprintf("+1555%07d", 1000+i)
	}
	var accepted struct {
		BatchID string `json:"batch_id"`
	}
	if st := httpJSON(t, http.MethodPost, gw.url+"/api/campaigns/send",
		map[string]any{"campaign_id": gw.campaignID, "contacts": phones}, &accepted, "service-api-key", full); st != http.StatusAccepted || accepted.BatchID == "" {
		t.Fatalf("campaign send: %d %+v", st, accepted)
	}
	id := accepted.BatchID

	// Under way: some messages sent, most still queued.
	eventually(t, "the batch under way", 30*time.Second, func() bool {
		c := e.messageStates(id)
		return c["sent"]+c["delivered"] >= 40
	})
	admin, member := e.browser(), e.browser()
	admin.mustSignIn("ada@acme.example")
	member.mustSignIn("max@acme.example")
	list := admin.get("/sends")
	if list.Status != http.StatusOK || !strings.Contains(list.Body, `data-batch-id="`+id+`"`) ||
		!strings.Contains(list.Body, `class="pill status pill-warn">Sending`) || !strings.Contains(list.Body, `<span class="name">Spring sale</span>`) || !strings.Contains(list.Body, `href="/sends/`+id+`/cancel"`) {
		t.Fatalf("the Sends page does not show the campaign under way with a cancel control (status %d)", list.Status)
	}
	page := admin.get("/sends/" + id)
	if c := stateCounts(page.Body); c["queued"] == "" || (c["sent"] == "" && c["delivered"] == "") {
		t.Fatalf("the batch page under way shows %v", c)
	}

	// A member's cancel is refused and changes nothing; the admin's works.
	if p := member.post("/sends/"+id+"/cancel", url.Values{"confirm": {"yes"}}); p.Status != http.StatusForbidden {
		t.Fatalf("member cancel: status %d", p.Status)
	}
	if c := e.messageStates(id); c["cancelled"] != 0 {
		t.Fatalf("a member's cancel cancelled %d messages", c["cancelled"])
	}
	if p := admin.post("/sends/"+id+"/cancel", url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("admin cancel: status %d", p.Status)
	}
	notice := regexp.MustCompile(`Send cancelled: (\d+) messages will not be sent.`).FindStringSubmatch(admin.get("/sends/" + id).Body)
	if notice == nil {
		t.Fatal("no notice of the cancel")
	}
	cancelled, _ := strconv.Atoi(notice[1])
	if cancelled == 0 || cancelled >= contacts {
		t.Fatalf("%d of %d messages cancelled, want some: the batch was under way", cancelled, contacts)
	}

	// Everything settles: nothing sending, every message sent or cancelled.
	var final map[string]int
	eventually(t, "the batch settles", 30*time.Second, func() bool {
		final = e.messageStates(id)
		return final["sending"]+final["queued"]+final["scheduled"]+final["deferred"]+final["sent"] == 0 && e.batchStatus(id) == "completed"
	})
	if final["cancelled"] != cancelled || final["delivered"]+final["cancelled"] != contacts {
		t.Fatalf("after the cancel: %v (the console said %d cancelled)", final, cancelled)
	}

	// provider-sim received exactly the messages not cancelled, none of the cancelled.
	var received struct {
		Messages []struct {
			To string `json:"to"`
		} `json:"messages"`
	}
	httpJSON(t, http.MethodGet, sim+"/_sim/messages?limit=1000&phone_number_id="+pnid, nil, &received)
	got := map[string]bool{}
	for _, m := range received.Messages {
		got[m.To] = true
	}
	rows, err := e.Pool.Query(ctx, `SELECT phone FROM messages WHERE batch_id = $1 AND state = 'cancelled'`, id)
	if err != nil {
		t.Fatal(err)
	}
	var cancelledPhones []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		cancelledPhones = append(cancelledPhones, p)
	}
	rows.Close()
	for _, p := range cancelledPhones {
		if got[p] {
			t.Fatalf("provider-sim received %s, whose message was cancelled", p)
		}
	}
	if len(received.Messages) != final["delivered"] || len(got) != final["delivered"] {
		t.Fatalf("provider-sim received %d messages (%d numbers), the batch has %d delivered", len(received.Messages), len(got), final["delivered"])
	}

	// The console shows what happened.
	page = member.get("/sends/" + id)
	c := stateCounts(page.Body)
	if c["cancelled"] != strconv.Itoa(cancelled) || c["delivered"] != strconv.Itoa(final["delivered"]) || len(c) != 2 {
		t.Fatalf("the batch page shows %v, the database has %v", c, final)
	}
	for _, s := range []string{`id="batch-status">Completed`, `class="area area-cancelled"`, `class="area area-delivered"`, `id="no-problems"`} {
		if !strings.Contains(page.Body, s) {
			t.Errorf("the batch page lacks %q", s)
		}
	}
	if strings.Contains(page.Body, "cancel-batch") {
		t.Error("the settled batch still offers cancel")
	}
	t.Logf("cancelled %d of %d; provider-sim received %d", cancelled, contacts, len(received.Messages))
}

// startCampaignDispatcher runs the campaign dispatcher binary on the
// environment, the gateway's Redis and provider-sim at sim.
func (e *env) startCampaignDispatcher(t *testing.T, bin string, gw *gateway, sim string) {
	t.Helper()
	addr := privateAddr(t)
	startService(t, "campaign-dispatcher", bin, "http://"+addr+"/readyz",
		"PARLEY_CAMPAIGN_DISPATCHER_ADDR="+addr,
		"PARLEY_POSTGRES_URL="+e.DatabaseURL, "PARLEY_POSTGRES_MAX_CONNS=6",
		"PARLEY_NATS_URL="+e.Bus.URL, "PARLEY_NATS_STREAM="+e.Bus.Stream, "PARLEY_NATS_SUBJECT_PREFIX="+e.Bus.Prefix,
		"PARLEY_REDIS_ADDR="+gw.redis.Addr, "PARLEY_REDIS_KEY_PREFIX="+gw.redis.KeyPrefix,
		"PARLEY_WHATSAPP_BASE_URL="+sim, "PARLEY_WHATSAPP_TIMEOUT=5s",
		"PARLEY_LOG_LEVEL=warn", "PARLEY_LOG_FORMAT=console")
}
