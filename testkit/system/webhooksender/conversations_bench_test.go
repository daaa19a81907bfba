//go:build bench

package webhooksender

// make bench-conversations: the two figures of the conversations, with the
// real gateway, automation dispatcher, webhook sender and provider-sim
// binaries, counted outside them.
//
//   - Inbound: signed WhatsApp webhooks POSTed to the gateway at
//     inboundRate messages a second for inboundFor, one message each (as
//     Meta posts a user's message); every wamid the gateway answered 200
//     must reach the test receiver as a message.received event exactly
//     once; from each POST's start to its event's receipt, p99 < 1 s.
//   - Replies: POST /api/messages (text, inside each contact's window) at
//     replyRate a second for replyFor over four companies (the route allows
//     100 a second per company); every message answered 202 must reach
//     provider-sim exactly once (counted per recipient: one reply per
//     contact); from each POST's start to provider-sim's receipt, p99 <
//     100 ms.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

const (
	inboundRate = 1000
	inboundFor  = 60 * time.Second
	replyRate   = 200
	replyFor    = 30 * time.Second
	appSecret   = "bench-app-secret"
)

// startGateway runs the gateway binary on the environment, with the
// bench's app secret; it returns the process and its base URL.
func (e *env) startGateway() (*serviceproc.Process, string) {
	return e.StartGateway("PARLEY_WEBHOOK_APP_SECRET=" + appSecret)
}

// inboundBody is a signed webhook of one text message from a user to pnid.
func inboundBody(pnid, wamid, from string, at time.Time) []byte {
	b, _ := json.Marshal(whatsapp.WebhookPayload{Object: whatsapp.WebhookObject, Entry: []whatsapp.WebhookEntry{{
		ID: pnid, Changes: []whatsapp.WebhookChange{{Field: "messages", Value: whatsapp.WebhookValue{
			MessagingProduct: "whatsapp",
			Metadata:         whatsapp.WebhookMetadata{DisplayPhoneNumber: pnid, PhoneNumberID: pnid},
			Contacts:         []whatsapp.WebhookContact{{Profile: whatsapp.WebhookProfile{Name: "Bench"}, WaID: from}},
			Messages: []whatsapp.WebhookMessage{{From: from, ID: wamid, Timestamp: strconv.FormatInt(at.Unix(), 10), Type: "text",
				Text: &whatsapp.WebhookText{Body: "Is my order shipped? " + wamid}}},
		}}},
	}}})
	return b
}

// pace calls fn(i) for i in [0, rate*d) at rate a second, each in its own
// goroutine, and waits for them all.
func pace(rate int, d time.Duration, fn func(i int)) {
	n := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

func percentile(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 30 * time.Second}

func post(url string, body []byte, headers ...string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestBenchInbound(t *testing.T) {
	e := newEnv(t)
	co := e.newCompany("inbound")
	// Receipts per wamid at the receiver, with the first one's time.
	var mu sync.Mutex
	got := map[string]int{}
	first := map[string]time.Time{}
	e.recv.Observe = func(_, _ string, body []byte, at time.Time) {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Wamid string `json:"wamid"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &ev) != nil || ev.Type != "message.received" {
			return
		}
		mu.Lock()
		got[ev.Data.Wamid]++
		if got[ev.Data.Wamid] == 1 {
			first[ev.Data.Wamid] = at
		}
		mu.Unlock()
	}
	e.startSender()
	gp, gw := e.startGateway()

	n := int(float64(inboundRate) * inboundFor.Seconds())
	started := make([]time.Time, n)
	status := make([]int, n)
	pg0, gw0 := drillenv.PostgresCPUSeconds(), drillenv.CPUSeconds(gp.Pid())
	t0 := time.Now()
	pace(inboundRate, inboundFor, func(i int) {
		wamid := fmt.Sprintf("wamid.bench.%d", i)
		from := strconv.FormatInt(14150000000+int64(i%5000), 10) // 5,000 contacts writing in
		body := inboundBody(co.Acct.PhoneNumberID, wamid, from, time.Now())
		started[i] = time.Now()
		st, _, err := post(gw+"/webhooks/whatsapp", body, whatsapp.SignatureHeader, whatsapp.Sign(appSecret, body))
		if err != nil {
			st = -1
		}
		status[i] = st
	})
	sendSpan := time.Since(t0)
	answered := 0
	for _, st := range status {
		if st == 200 {
			answered++
		}
	}
	// Every answered wamid's event, or the time is up.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		have := len(got)
		mu.Unlock()
		if have >= answered || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a late duplicate would show
	gwCPU, pgCPU := drillenv.CPUSeconds(gp.Pid())-gw0, drillenv.PostgresCPUSeconds()-pg0
	mu.Lock()
	var lost, dups int
	lat := make([]float64, 0, n)
	for i := range n {
		if status[i] != 200 {
			continue
		}
		w := fmt.Sprintf("wamid.bench.%d", i)
		c := got[w]
		if c == 0 {
			lost++
			continue
		}
		dups += c - 1
		lat = append(lat, float64(first[w].Sub(started[i]).Microseconds())/1000)
	}
	mu.Unlock()
	p50, p99, pmax := percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	t.Logf("inbound: %d webhooks POSTed in %s (%.0f/s), %d answered 200; at the receiver: %d received, %d lost, %d duplicated",
		n, sendSpan.Round(time.Millisecond), float64(n)/sendSpan.Seconds(), answered, len(lat), lost, dups)
	t.Logf("inbound: POST -> message.received at the receiver: p50 %.1f ms, p99 %.1f ms, max %.1f ms", p50, p99, pmax)
	t.Logf("inbound CPU per message: gateway %.0f µs, PostgreSQL (every backend on the machine) %.0f µs",
		gwCPU/float64(answered)*1e6, pgCPU/float64(answered)*1e6)
	if answered != n {
		t.Errorf("%d of %d webhooks not answered 200", n-answered, n)
	}
	if lost != 0 || dups != 0 {
		t.Errorf("lost %d, duplicated %d: want 0 and 0", lost, dups)
	}
	if p99 >= 1000 {
		t.Errorf("target missed: p99 %.1f ms from the webhook to the event, want under 1 s", p99)
	}
	if rate := float64(n) / sendSpan.Seconds(); rate < 0.95*inboundRate {
		t.Errorf("the load ran at %.0f/s, under 95%% of %d/s: the figure is not the target's", rate, inboundRate)
	}
}

func TestBenchReplies(t *testing.T) {
	e := newEnv(t)
	e.StartAutomation()
	_, gw := e.startGateway()
	const companies = 4 // the route allows 100 a second per company
	n := int(float64(replyRate) * replyFor.Seconds())
	keys := make([]string, companies)
	senders := make([]drillenv.Sender, companies)
	ks := apikey.NewStore(e.Pool, nil)
	for c := range companies {
		senders[c] = e.NewSender("replies"+strconv.Itoa(c), 1000)
		var err error
		if keys[c], _, err = ks.Create(e.Ctx, senders[c].Company.ID, apikey.Actor{Label: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
	// Each contact writes in first (through the gateway's webhook, as Meta
	// would), so that its window is open at Parley; provider-sim plays
	// the same message so that its window is open there too.
	phones := e.NextPhones(n)
	for i, p := range phones {
		s := senders[i%companies]
		digits := strings.TrimPrefix(p, "+")
		body := inboundBody(s.Acct.PhoneNumberID, "wamid.open."+digits, digits, time.Now())
		if st, b, err := post(gw+"/webhooks/whatsapp", body, whatsapp.SignatureHeader, whatsapp.Sign(appSecret, body)); err != nil || st != 200 {
			t.Fatalf("open the window of %s: %d %s %v", p, st, b, err)
		}
	}
	e.Sim.Do(http.MethodPatch, "/_sim/rules", map[string]any{"enforce_service_window": false}, nil)

	started := make([]time.Time, n)
	ids := make([]int64, n)
	var refused atomic.Int64
	t0 := time.Now()
	pace(replyRate, replyFor, func(i int) {
		c := i % companies
		body, _ := json.Marshal(map[string]any{"to": phones[i], "type": "text", "text": map[string]any{"body": "Yes, it left today"}})
		started[i] = time.Now()
		st, b, err := post(gw+"/api/messages", body, "service-api-key", keys[c])
		if err != nil || st != 202 {
			refused.Add(1)
			t.Logf("reply %d: %d %s %v", i, st, b, err)
			return
		}
		var a struct {
			MessageID int64 `json:"message_id"`
		}
		_ = json.Unmarshal(b, &a)
		ids[i] = a.MessageID
	})
	span := time.Since(t0)
	// provider-sim's receipts, per recipient.
	var received struct {
		Messages []struct {
			To         string    `json:"to"`
			ReceivedAt time.Time `json:"received_at"`
		} `json:"messages"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.Sim.Do(http.MethodGet, "/_sim/messages?limit="+strconv.Itoa(2*n), nil, &received)
		if len(received.Messages) >= n-int(refused.Load()) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	e.Sim.Do(http.MethodGet, "/_sim/messages?limit="+strconv.Itoa(2*n), nil, &received)
	byTo := map[string][]time.Time{}
	for _, r := range received.Messages {
		byTo["+"+strings.TrimPrefix(r.To, "+")] = append(byTo["+"+strings.TrimPrefix(r.To, "+")], r.ReceivedAt)
	}
	var lost, dups int
	lat := make([]float64, 0, n)
	for i, p := range phones {
		if ids[i] == 0 {
			continue
		}
		at := byTo[p]
		if len(at) == 0 {
			lost++
			continue
		}
		dups += len(at) - 1
		lat = append(lat, float64(at[0].Sub(started[i]).Microseconds())/1000)
	}
	p50, p99, pmax := percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	t.Logf("replies: %d POST /api/messages in %s (%.0f/s over %d companies), %d refused; at provider-sim: %d received, %d lost, %d duplicated",
		n, span.Round(time.Millisecond), float64(n)/span.Seconds(), companies, refused.Load(), len(lat), lost, dups)
	t.Logf("replies: POST -> provider-sim receipt: p50 %.1f ms, p99 %.1f ms, max %.1f ms", p50, p99, pmax)
	if refused.Load() != 0 || lost != 0 || dups != 0 {
		t.Errorf("refused %d, lost %d, duplicated %d: want 0, 0 and 0", refused.Load(), lost, dups)
	}
	if p99 >= 100 {
		t.Errorf("target missed: p99 %.1f ms from the reply to the provider, want under 100 ms", p99)
	}
	if rate := float64(n) / span.Seconds(); rate < 0.95*replyRate {
		t.Errorf("the load ran at %.0f/s, under 95%% of %d/s", rate, replyRate)
	}
}
