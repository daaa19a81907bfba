package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/services/provider-sim/internal/config"
)

// TestServiceServesSendsProbesAndShutsDown boots the service as main does
// (config from the environment, newApp, the graceful server) on a loopback
// port, sends through the real client, and stops it with a request still
// hanging in a simulated timeout.
func TestServiceServesSendsProbesAndShutsDown(t *testing.T) {
	t.Setenv("PARLEY_PROVIDER_SIM_ACCOUNTS", "5550001:tok-a,5550002:tok-b:1")
	t.Setenv("PARLEY_PROVIDER_SIM_UNDELIVERABLE", "+1999*")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	a, cleanup, err := newApp(context.Background(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.server.Serve(ctx, ln, a.probe, a.log) }()

	cl, err := whatsapp.NewClient(whatsapp.Config{BaseURL: base, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tpl := whatsapp.Template{Name: "hello_world", Language: "en_US"}
	to := whatsapp.Recipient{Phone: "+14155550123"}
	id, err := cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: "5550001", AccessToken: "tok-a"}, tpl, to, whatsapp.Overrides{})
	if err != nil || !strings.HasPrefix(id, "wamid.") {
		t.Fatalf("send: %q %v", id, err)
	}
	acctB := whatsapp.Account{PhoneNumberID: "5550002", AccessToken: "tok-b"}
	if _, err := cl.SendTemplate(context.Background(), acctB, tpl, to, whatsapp.Overrides{}); err != nil {
		t.Fatal(err)
	}
	// Account b was configured at 1/s.
	if _, err := cl.SendTemplate(context.Background(), acctB, tpl, to, whatsapp.Overrides{}); whatsapp.Classify(err) != whatsapp.Retryable {
		t.Fatalf("over 1/s: %v", err)
	}

	for path, want := range map[string]string{
		"/healthz":         `"ok"`,
		"/readyz":          `"ready"`,
		"/metrics":         "parley_provider_sim_sends_total 2",
		"/_sim/stats":      `"accepted":2`,
		"/_sim/faults":     `"+1999*"`,
		"/_sim/accounts":   `"throughput_per_second":1`,
		"/_sim/rules":      `{"service_window":"24h0m0s","enforce_service_window":true,"service_window_error":"status","time_scale":1,`,
		"/_sim/portfolios": `"tier":"TIER_UNLIMITED"`,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, want %s in %s", path, resp.StatusCode, want, b)
		}
		if strings.Contains(string(b), "tok-a") {
			t.Errorf("GET %s shows a token", path)
		}
	}
	if !strings.Contains(metrics(t, base), `parley_provider_sim_errors_total{code="130429"} 1`) {
		t.Error("the 130429 answer is not counted by code")
	}
	// A session message to a user who never wrote is accepted, then
	// fails by status with 131047 (the customer service window).
	text := whatsapp.Session{Type: "text", Text: &whatsapp.SessionText{Body: "hi"}}
	if _, err := cl.SendSession(context.Background(), whatsapp.Account{PhoneNumberID: "5550001", AccessToken: "tok-a"}, "+14155550124", text); err != nil {
		t.Fatalf("session send: %v", err)
	}
	if resp, err := http.Get(base + "/_sim/stats"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"window_closed":1`) {
			t.Errorf("stats after a session send outside the window: %s", b)
		}
	}

	// A request hanging in a simulated timeout must not hold shutdown.
	req, _ := http.NewRequest(http.MethodPatch, base+"/_sim/faults", strings.NewReader(`{"timeout_rate":1}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("switch timeouts on: %v %v", resp, err)
	}
	resp.Body.Close() // else its connection's goroutines outlive the test
	hung := make(chan error, 1)
	go func() {
		_, err := cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: "5550001", AccessToken: "tok-a"}, tpl, to, whatsapp.Overrides{})
		hung <- err
	}()
	for !strings.Contains(metrics(t, base), "parley_provider_sim_timeouts_total 1") {
		time.Sleep(10 * time.Millisecond)
	}
	began := time.Now()
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown waited for the hanging request")
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := <-hung; whatsapp.Classify(err) != whatsapp.Retryable {
		t.Errorf("hanging send ended with %v", err)
	}
}

func metrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
