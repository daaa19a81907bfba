package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// The browser test checks each key change where customers meet it: a real
// gateway process, built from services/gateway once per test binary, on the
// test's database, NATS server and a Redis prefix of its own.

var (
	gatewayBuildDir string
	gatewayBinary   = sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "parley-admin-test-gateway-")
		if err != nil {
			return "", err
		}
		gatewayBuildDir = dir
		bin := filepath.Join(dir, "gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out bytes.Buffer
		if err := serviceproc.BuildService(ctx, "gateway", bin, &out); err != nil {
			return "", fmt.Errorf("%w\n%s", err, out.String())
		}
		return bin, nil
	})
)

func TestMain(m *testing.M) {
	code := m.Run()
	if gatewayBuildDir != "" {
		_ = os.RemoveAll(gatewayBuildDir)
	}
	removeServiceBuilds()
	os.Exit(code)
}

// gateway is a running gateway process and a campaign of the env's company
// that a send may name.
type gateway struct {
	t          *testing.T
	url        string
	campaignID int64
	client     *http.Client
	// redis is the gateway's Redis, for the dispatchers beside it.
	redis ratelimit.RedisConfig
}

// startGateway provisions a sendable campaign for the env's company and
// starts a gateway beside the env's admin app. Its cache TTL is an hour, so
// that only the admin's broadcast can make a key change show in time.
func (e *env) startGateway() *gateway {
	t := e.t
	t.Helper()
	ctx := context.Background()
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatalf("build the gateway: %v", err)
	}

	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewStore(e.Pool, box)
	acct, err := cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: e.CompanyID, Name: "main",
		PhoneNumberID: strconv.FormatInt(1_000_000+e.CompanyID, 10), AccessToken: "test-token", Connected: true})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: e.CompanyID, Template: whatsapp.Template{
		Name: "hello", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}}}})
	if err != nil {
		t.Fatal(err)
	}
	camp, err := cat.CreateCampaign(ctx, e.CompanyID, "Spring sale", tpl.ID, acct.ID)
	if err != nil {
		t.Fatal(err)
	}

	redis := ratelimittest.Config(t)
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := serviceproc.Start(ctx, serviceproc.Options{
		Name: "gateway", Bin: bin,
		Env: []string{
			"PARLEY_GATEWAY_ADDR=" + addr,
			"PARLEY_GATEWAY_CACHE_TTL=1h",
			"PARLEY_POSTGRES_URL=" + e.DatabaseURL,
			"PARLEY_POSTGRES_MAX_CONNS=4",
			"PARLEY_NATS_URL=" + e.Bus.URL,
			"PARLEY_NATS_STREAM=" + e.Bus.Stream,
			"PARLEY_NATS_SUBJECT_PREFIX=" + e.Bus.Prefix,
			"PARLEY_REDIS_ADDR=" + redis.Addr,
			"PARLEY_REDIS_KEY_PREFIX=" + redis.KeyPrefix,
			"PARLEY_LOG_LEVEL=warn",
			"PARLEY_LOG_FORMAT=console",
		},
		Probe: "http://" + addr + "/readyz",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%v; its output ends:\n%s", err, p.Logs())
		}
	})
	return &gateway{t: t, url: "http://" + addr, campaignID: camp.ID, client: &http.Client{Timeout: 10 * time.Second}, redis: redis}
}

// send posts a one-contact campaign send with key and returns the status.
// Anything but 202 (let in) or 401 (refused) is a failure of the test:
// the key's company is subscribed and provisioned, and the campaign valid.
func (g *gateway) send(ctx context.Context, key string) (int, error) {
	body := fmt.Sprintf(`{"campaign_id":%d,"contacts":["+15551230001"]}`, g.campaignID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/api/campaigns/send", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("service-api-key", key)
	res, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	switch res.StatusCode {
	case http.StatusAccepted, http.StatusUnauthorized:
		return res.StatusCode, nil
	case http.StatusTooManyRequests:
		// Only while polling for a refusal: the key was still let in.
		return res.StatusCode, nil
	}
	return res.StatusCode, fmt.Errorf("POST /api/campaigns/send: status %d: %s", res.StatusCode, b)
}

// expect checks that the gateway lets key in (202) or refuses it (401).
// A refusal follows a broadcast that reaches the gateway asynchronously, so
// it is polled for, briefly: far less than the hour-long cache TTL.
func (g *gateway) expect(ctx context.Context, what, key string, accepted bool) {
	g.t.Helper()
	if accepted {
		status, err := g.send(ctx, key)
		if err != nil || status != http.StatusAccepted {
			g.t.Fatalf("%s: gateway answered %d (%v), want 202", what, status, err)
		}
		return
	}
	start := time.Now()
	deadline := start.Add(2 * time.Second)
	for {
		status, err := g.send(ctx, key)
		if err != nil {
			g.t.Fatalf("%s: %v", what, err)
		}
		if status == http.StatusUnauthorized {
			g.t.Logf("%s: the gateway refused it %s after the console's answer", what, time.Since(start).Round(time.Microsecond))
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: the gateway still answers %d %s later; the broadcast did not reach it", what, status, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
