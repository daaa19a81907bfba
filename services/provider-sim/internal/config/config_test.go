package config

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

func TestDefaultsWorkLocally(t *testing.T) {
	cfg, err := Load()
	if err != nil {
		t.Fatalf("Load with no environment: %v", err)
	}
	sc, err := cfg.SimConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":9090" || sc.Throughput != 80 || sc.Callbacks.URL != "" || sc.Callbacks.NoRead ||
		sc.MessageBuffer != 10_000 || sc.MaxRecipients != 200_000 || sc.Callbacks.QueueSize != 100_000 || len(sc.Accounts) != 0 {
		t.Errorf("defaults: %+v", sc)
	}
}

func TestEnvironmentReachesTheSimulator(t *testing.T) {
	for k, v := range map[string]string{
		"PARLEY_PROVIDER_SIM_ACCOUNTS":        "1001:tok-1, 1002:tok-2:500",
		"PARLEY_PROVIDER_SIM_THROUGHPUT":      "40",
		"PARLEY_PROVIDER_SIM_LATENCY":         "20ms",
		"PARLEY_PROVIDER_SIM_JITTER":          "5ms",
		"PARLEY_PROVIDER_SIM_ERROR_RATE":      "0.1",
		"PARLEY_PROVIDER_SIM_TIMEOUT_RATE":    "0.01",
		"PARLEY_PROVIDER_SIM_PAIR_INTERVAL":   "6s",
		"PARLEY_PROVIDER_SIM_UNDELIVERABLE":   "+39333*,14155550000",
		"PARLEY_PROVIDER_SIM_CALLBACK_URL":    "http://127.0.0.1:8080/webhooks/whatsapp",
		"PARLEY_PROVIDER_SIM_APP_SECRET":      "s3",
		"PARLEY_PROVIDER_SIM_READ":            "false",
		"PARLEY_PROVIDER_SIM_CALLBACK_QUEUE":  "1000",
		"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER":  "50",
		"PARLEY_PROVIDER_SIM_MAX_RECIPIENTS":  "70",
		"PARLEY_PROVIDER_SIM_DELIVERED_DELAY": "1s",
	} {
		t.Setenv(k, v)
	}
	cfg, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := cfg.SimConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := []whatsappsim.Account{{PhoneNumberID: "1001", Token: "tok-1"}, {PhoneNumberID: "1002", Token: "tok-2", ThroughputPerSecond: 500}}
	if len(sc.Accounts) != 2 || sc.Accounts[0] != want[0] || sc.Accounts[1] != want[1] {
		t.Errorf("accounts = %+v", sc.Accounts)
	}
	f := sc.Faults
	if sc.Throughput != 40 || f.Latency != 20*time.Millisecond || f.Jitter != 5*time.Millisecond || f.ErrorRate != 0.1 ||
		f.TimeoutRate != 0.01 || f.PairInterval != 6*time.Second || len(f.Undeliverable) != 2 {
		t.Errorf("faults = %+v", f)
	}
	cb := sc.Callbacks
	if cb.URL != "http://127.0.0.1:8080/webhooks/whatsapp" || cb.AppSecret != "s3" || !cb.NoRead || cb.QueueSize != 1000 ||
		cb.DeliveredDelay != time.Second || sc.MessageBuffer != 50 || sc.MaxRecipients != 70 {
		t.Errorf("callbacks = %+v, caps %d %d", cb, sc.MessageBuffer, sc.MaxRecipients)
	}
}

func TestValidateListsEveryProblemWithoutTokens(t *testing.T) {
	for k, v := range map[string]string{
		"PARLEY_PROVIDER_SIM_ACCOUNTS":       "1001:secret-token-1,abc:secret-token-2,1001:secret-token-3,1003",
		"PARLEY_PROVIDER_SIM_ERROR_RATE":     "1.5",
		"PARLEY_PROVIDER_SIM_UNDELIVERABLE":  "+1x*",
		"PARLEY_PROVIDER_SIM_CALLBACK_URL":   "http://127.0.0.1:8080/x",
		"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER": "0",
	} {
		t.Setenv(k, v)
	}
	_, err := Load()
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`"abc"`, "1001 appears twice", "entry 4", "shares between 0 and 1", `"1x"`,
		"needs an app secret", "PARLEY_PROVIDER_SIM_MESSAGE_BUFFER must be positive",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "secret-token") {
		t.Errorf("error repeats a token:\n%s", msg)
	}
}
