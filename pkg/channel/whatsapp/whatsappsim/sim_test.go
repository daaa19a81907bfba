package whatsappsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

const (
	pnid  = "1001"
	token = "EAAG-sim-token"
)

var (
	acct = whatsapp.Account{PhoneNumberID: pnid, AccessToken: token}
	tpl  = whatsapp.Template{
		Name: "order_update", Language: "en_US",
		HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/h.jpg",
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order", Default: "-"}},
		URLButtons:     []whatsapp.URLButton{{Base: "https://shop.example/", DefaultSuffix: "o"}},
	}
)

func recipient(n int) whatsapp.Recipient {
	return whatsapp.Recipient{Phone: fmt.Sprintf("+1415555%04d", n), FirstName: "Ann"}
}

// env is a simulator on a real loopback listener and the real client.
type env struct {
	sim *whatsappsim.Sim
	srv *httptest.Server
	cl  *whatsapp.Client
}

func start(t testing.TB, cfg whatsappsim.Config, clientTimeout time.Duration) *env {
	t.Helper()
	if cfg.Accounts == nil {
		cfg.Accounts = []whatsappsim.Account{{PhoneNumberID: pnid, Token: token}}
	}
	sim, err := whatsappsim.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(sim)
	cl, err := whatsapp.NewClient(whatsapp.Config{BaseURL: srv.URL, APIVersion: "v21.0", Timeout: clientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		_ = sim.Close() // first: it releases hanging requests
		srv.Close()
	})
	return &env{sim: sim, srv: srv, cl: cl}
}

func (e *env) send(to whatsapp.Recipient) (string, error) {
	return e.cl.SendTemplate(context.Background(), acct, tpl, to, whatsapp.Overrides{})
}

func providerError(t *testing.T, err error) *whatsapp.Error {
	t.Helper()
	var pe *whatsapp.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *whatsapp.Error", err)
	}
	return pe
}

func TestTokenAndAccountChecks(t *testing.T) {
	e := start(t, whatsappsim.Config{}, 5*time.Second)

	id, err := e.send(recipient(1))
	if err != nil || !strings.HasPrefix(id, "wamid.") {
		t.Fatalf("good send: %q %v", id, err)
	}

	_, err = e.cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: pnid, AccessToken: "wrong"}, tpl, recipient(1), whatsapp.Overrides{})
	pe := providerError(t, err)
	if pe.HTTPStatus != 401 || pe.Code != 190 || pe.Class != whatsapp.RetryLater || pe.TraceID == "" {
		t.Errorf("wrong token: %+v", pe)
	}

	_, err = e.cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: "9999", AccessToken: token}, tpl, recipient(1), whatsapp.Overrides{})
	pe = providerError(t, err)
	if pe.HTTPStatus != 400 || pe.Code != 100 || pe.Subcode != 33 || pe.Class != whatsapp.RetryLater {
		t.Errorf("unknown number: %+v", pe)
	}

	st := e.sim.Stats()
	if st.Requests != 3 || st.Accepted != 1 || st.Errors["190"] != 1 || st.Errors["100"] != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestIDsAreUnique(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000}, 5*time.Second)
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				id, err := e.send(recipient(g*100 + i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 400 {
		t.Errorf("%d ids, want 400", len(seen))
	}
}

func TestThroughputThenSuccessAfterWaiting(t *testing.T) {
	e := start(t, whatsappsim.Config{Accounts: []whatsappsim.Account{{PhoneNumberID: pnid, Token: token, ThroughputPerSecond: 5}}}, 5*time.Second)
	for i := range 5 {
		if _, err := e.send(recipient(i)); err != nil {
			t.Fatalf("send %d within the burst: %v", i, err)
		}
	}
	_, err := e.send(recipient(5))
	pe := providerError(t, err)
	if pe.Code != 130429 || pe.Class != whatsapp.Retryable || pe.HTTPStatus != 400 || pe.Title != "Rate limit hit" {
		t.Fatalf("over the rate: %+v", pe)
	}
	time.Sleep(250 * time.Millisecond) // one token at 5/s
	if _, err := e.send(recipient(5)); err != nil {
		t.Fatalf("after waiting: %v", err)
	}
	if st := e.sim.Stats(); st.Errors["130429"] != 1 || st.Accepted != 6 {
		t.Errorf("stats = %+v", st)
	}
}

func TestServerErrorShare(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Faults: whatsappsim.Faults{ErrorRate: 1}}, 5*time.Second)
	for i := range 10 {
		_, err := e.send(recipient(i))
		pe := providerError(t, err)
		if pe.Class != whatsapp.Retryable || !(pe.HTTPStatus == 500 && pe.Code == 131000 || pe.HTTPStatus == 503 && pe.Code == 131016) {
			t.Fatalf("5xx: %+v", pe)
		}
	}
	e.sim.Reset()
	if err := e.sim.SetFaults(whatsappsim.Faults{ErrorRate: 0.3}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	const n = 300
	for i := range n {
		if _, err := e.send(recipient(i)); err != nil {
			failed++
		}
	}
	// Mean 90, standard deviation ~8: the bounds are > 5 sigma away.
	if failed < 45 || failed > 135 {
		t.Errorf("%d of %d failed with a 0.3 share", failed, n)
	}
	st := e.sim.Stats()
	if got := st.Errors["131000"] + st.Errors["131016"]; got != int64(failed) || st.Accepted != int64(n-failed) {
		t.Errorf("stats %+v, want %d errors", st, failed)
	}
}

func TestTimeoutShareHangsUntilTheClientGivesUp(t *testing.T) {
	e := start(t, whatsappsim.Config{Faults: whatsappsim.Faults{TimeoutRate: 1}}, 200*time.Millisecond)
	_, err := e.send(recipient(1))
	pe := providerError(t, err)
	if pe.Class != whatsapp.Retryable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a Retryable deadline", err)
	}
	st := e.sim.Stats()
	if st.Hung != 1 || st.Accepted != 0 || len(e.sim.Messages(whatsappsim.Filter{})) != 0 {
		t.Errorf("a hung send was recorded: %+v", st)
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	e := start(t, whatsappsim.Config{Faults: whatsappsim.Faults{TimeoutRate: 1}}, time.Minute)
	done := make(chan error, 1)
	go func() { _, err := e.send(recipient(1)); done <- err }()
	for e.sim.Stats().Hung == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = e.sim.Close()
	select {
	case err := <-done:
		if whatsapp.Classify(err) != whatsapp.Retryable {
			t.Errorf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left the request hanging")
	}
}

func TestLatencyIsAdded(t *testing.T) {
	e := start(t, whatsappsim.Config{Faults: whatsappsim.Faults{Latency: 150 * time.Millisecond, Jitter: 20 * time.Millisecond}}, 5*time.Second)
	began := time.Now()
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 150*time.Millisecond {
		t.Errorf("send took %v, want at least the 150ms latency", d)
	}
}

func TestPairRateLimit(t *testing.T) {
	e := start(t, whatsappsim.Config{Faults: whatsappsim.Faults{PairInterval: 500 * time.Millisecond}}, 5*time.Second)
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatal(err)
	}
	_, err := e.send(recipient(1))
	pe := providerError(t, err)
	if pe.Code != 131056 || pe.Class != whatsapp.RetryLater || pe.RetryAfter != whatsapp.PairRateFloor {
		t.Fatalf("same pair too soon: %+v", pe)
	}
	if _, err := e.send(recipient(2)); err != nil {
		t.Fatalf("another recipient: %v", err)
	}
	time.Sleep(550 * time.Millisecond)
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatalf("after the interval: %v", err)
	}
}

func TestInspection(t *testing.T) {
	e := start(t, whatsappsim.Config{Accounts: []whatsappsim.Account{
		{PhoneNumberID: pnid, Token: token},
		{PhoneNumberID: "2002", Token: "other-token"},
	}}, 5*time.Second)
	a, b := recipient(1), recipient(2)
	for _, to := range []whatsapp.Recipient{a, a, b} {
		if _, err := e.send(to); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: "2002", AccessToken: "other-token"}, tpl, b, whatsapp.Overrides{}); err != nil {
		t.Fatal(err)
	}

	if got := e.sim.SendCount(a.Phone); got != 2 {
		t.Errorf("SendCount(a) = %d", got)
	}
	var msgs struct {
		Messages []whatsappsim.Received `json:"messages"`
		Count    int                    `json:"count"`
	}
	getJSON(t, e.srv.URL+"/_sim/messages?to="+strings.TrimPrefix(b.Phone, "+")+"&phone_number_id=2002", &msgs)
	if msgs.Count != 1 || msgs.Messages[0].PhoneNumberID != "2002" || msgs.Messages[0].Template != "order_update" || msgs.Messages[0].Language != "en_US" {
		t.Errorf("messages = %+v", msgs)
	}
	// The recorded components are what the client rendered.
	want, _ := whatsapp.BuildTemplateMessage(tpl, b, whatsapp.Overrides{})
	wj, _ := json.Marshal(want.Template.Components)
	gj, _ := json.Marshal(msgs.Messages[0].Components)
	if string(wj) != string(gj) {
		t.Errorf("components %s, want %s", gj, wj)
	}

	var dups []whatsappsim.RecipientCount
	getJSON(t, e.srv.URL+"/_sim/recipients?min=2", &dups)
	if len(dups) != 2 || dups[0].Count != 2 || dups[1].Count != 2 {
		t.Errorf("recipients with 2+ sends = %+v", dups)
	}
	// Counts of named recipients, never-received ones included, in order.
	resp, err := http.Post(e.srv.URL+"/_sim/recipients/counts", "application/json",
		strings.NewReader(`{"to":["`+b.Phone+`","+19990000000","`+strings.TrimPrefix(a.Phone, "+")+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var counts struct {
		Counts []whatsappsim.RecipientCount `json:"counts"`
	}
	err = json.NewDecoder(resp.Body).Decode(&counts)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || fmt.Sprint(counts.Counts) != fmt.Sprintf("[{%s 2} {+19990000000 0} {%s 2}]", b.Phone, strings.TrimPrefix(a.Phone, "+")) {
		t.Errorf("recipient counts: %d %+v %v", resp.StatusCode, counts, err)
	}
	tooMany := `{"to":[` + strings.TrimSuffix(strings.Repeat(`"+1",`, whatsappsim.MaxCountsLookup+1), ",") + `]}`
	for _, bad := range []string{`{"phones":[]}`, tooMany} {
		resp, err := http.Post(e.srv.URL+"/_sim/recipients/counts", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatalf("bad counts request %.40s: %v", bad, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("bad counts request %.40s: %d, want 400", bad, resp.StatusCode)
		}
	}

	var st whatsappsim.Stats
	getJSON(t, e.srv.URL+"/_sim/stats", &st)
	if st.Accepted != 4 || st.Recipients != 2 || st.DuplicateRecipients != 2 || st.MaxPerRecipient != 2 || st.Buffered != 4 {
		t.Errorf("stats = %+v", st)
	}
	if st.AcceptedPerSecond <= 0 {
		t.Errorf("rate = %v", st.AcceptedPerSecond)
	}

	resp, err = http.Post(e.srv.URL+"/_sim/reset", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reset: %v %v", resp, err)
	}
	resp.Body.Close()
	if st := e.sim.Stats(); st.Accepted != 0 || st.Recipients != 0 || st.Buffered != 0 || st.Requests != 0 {
		t.Errorf("after reset: %+v", st)
	}
	if _, err := e.send(a); err != nil {
		t.Fatalf("accounts survive a reset: %v", err)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryCaps(t *testing.T) {
	e := start(t, whatsappsim.Config{
		Throughput:    1_000_000,
		MessageBuffer: 10,
		MaxRecipients: 20,
		Faults:        whatsappsim.Faults{PairInterval: time.Hour},
		Callbacks: whatsappsim.CallbackConfig{
			// Nothing comes due during the test: the queue only fills.
			CallbackSettings: whatsappsim.CallbackSettings{URL: "http://127.0.0.1:1/never", AppSecret: "s", SentDelay: time.Hour},
			QueueSize:        5,
		},
	}, 5*time.Second)
	for i := range 50 {
		if _, err := e.send(recipient(i)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	msgs := e.sim.Messages(whatsappsim.Filter{Limit: 1000})
	if len(msgs) != 10 || msgs[0].To != "14155550040" || msgs[9].To != "14155550049" {
		t.Errorf("ring kept %d messages (%v .. ), want the newest 10", len(msgs), msgs)
	}
	st := e.sim.Stats()
	if st.Recipients != 20 || st.UntrackedSends != 30 || st.Buffered != 10 {
		t.Errorf("recipient cap: %+v", st)
	}
	if st.Callbacks.Queued != 5 || st.Callbacks.DroppedQueueFull != 45 {
		t.Errorf("callback queue cap: %+v", st.Callbacks)
	}
	if st.Caps != (whatsappsim.Caps{MessageBuffer: 10, MaxRecipients: 20, CallbackQueue: 5}) {
		t.Errorf("caps = %+v", st.Caps)
	}
	// The pair limiter holds 20 pairs too: a tracked pair is limited, one
	// past the cap is not.
	if _, err := e.send(recipient(0)); providerError(t, err).Code != 131056 {
		t.Errorf("tracked pair not limited: %v", err)
	}
	if _, err := e.send(recipient(49)); err != nil {
		t.Errorf("untracked pair: %v", err)
	}
}

func TestAdminEndpoints(t *testing.T) {
	e := start(t, whatsappsim.Config{Faults: whatsappsim.Faults{Undeliverable: []string{"+1999*"}}}, 5*time.Second)
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := do("PUT", "/_sim/accounts/3003", `{"token":"tok-3","throughput_per_second":2}`); code != 200 || !strings.Contains(body, `"throughput_per_second":2`) || strings.Contains(body, "tok-3") {
		t.Fatalf("put account: %d %s", code, body)
	}
	a3 := whatsapp.Account{PhoneNumberID: "3003", AccessToken: "tok-3"}
	if _, err := e.cl.SendTemplate(context.Background(), a3, tpl, recipient(1), whatsapp.Overrides{}); err != nil {
		t.Fatalf("send on a runtime account: %v", err)
	}
	if code, _ := do("DELETE", "/_sim/accounts/3003", ""); code != 204 {
		t.Fatalf("delete account: %d", code)
	}
	_, err := e.cl.SendTemplate(context.Background(), a3, tpl, recipient(1), whatsapp.Overrides{})
	if pe := providerError(t, err); pe.Code != 100 || pe.Subcode != 33 {
		t.Errorf("removed account: %+v", pe)
	}

	for _, bad := range []string{`{"latency":5}`, `{"error_rate":2}`, `{"undeliverable":["abc"]}`, `{"latency_ms":-1}`} {
		if code, _ := do("PATCH", "/_sim/faults", bad); code != 400 {
			t.Errorf("PATCH faults %s: %d", bad, code)
		}
	}
	if code, body := do("PATCH", "/_sim/faults", `{"error_rate":0.5,"latency_ms":3}`); code != 200 ||
		!strings.Contains(body, `"error_rate":0.5`) || !strings.Contains(body, `"latency_ms":3`) || !strings.Contains(body, `"+1999*"`) {
		t.Errorf("PATCH faults merges: %d %s", code, body)
	}
	if code, _ := do("PATCH", "/_sim/callbacks", `{"url":"http://127.0.0.1:9/x"}`); code != 400 {
		t.Errorf("callback URL without a secret accepted: %d", code)
	}
	if code, body := do("PATCH", "/_sim/callbacks", `{"url":"http://127.0.0.1:9/x","app_secret":"s3cret","read":false}`); code != 200 ||
		strings.Contains(body, "s3cret") || !strings.Contains(body, `"app_secret_set":true`) || !strings.Contains(body, `"read":false`) {
		t.Errorf("PATCH callbacks: %d %s", code, body)
	}
	if code, body := do("PUT", "/_sim/templates/promo/en_US", `{"header":"video","body_parameters":1}`); code != 200 || !strings.Contains(body, `"name":"promo"`) {
		t.Errorf("PUT template: %d %s", code, body)
	}
	if code, _ := do("PUT", "/_sim/templates/promo/en_US", `{"header":"gif"}`); code != 400 {
		t.Errorf("bad template accepted: %d", code)
	}
	if code, _ := do("POST", "/_sim/reset", ""); code != 200 {
		t.Fatal("reset")
	}
	if f := e.sim.Faults(); f.ErrorRate != 0 || f.Latency != 0 || len(f.Undeliverable) != 1 {
		t.Errorf("reset did not restore the configured faults: %+v", f)
	}
	if c := e.sim.CallbackSettings(); c.URL != "" {
		t.Errorf("reset did not restore callbacks: %+v", c)
	}
	if len(e.sim.Templates()) != 1 {
		t.Errorf("templates are set-up and survive a reset")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := start(t, whatsappsim.Config{Registerer: reg, Accounts: []whatsappsim.Account{{PhoneNumberID: pnid, Token: token, ThroughputPerSecond: 1}}}, 5*time.Second)
	_, _ = e.send(recipient(1))
	_, _ = e.send(recipient(2)) // over 1/s
	exp := `
# HELP parley_provider_sim_requests_total Send requests received.
# TYPE parley_provider_sim_requests_total counter
parley_provider_sim_requests_total 2
# HELP parley_provider_sim_sends_total Sends accepted (answered 200 with a wamid).
# TYPE parley_provider_sim_sends_total counter
parley_provider_sim_sends_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "parley_provider_sim_requests_total", "parley_provider_sim_sends_total"); err != nil {
		t.Error(err)
	}
	if got := counterValue(t, reg, "parley_provider_sim_errors_total", "130429"); got != 1 {
		t.Errorf("errors_total{code=130429} = %v", got)
	}
}

// counterValue reads one counter series (by its only label value) from a gather.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s{%s} not found", name, label)
	return 0
}
