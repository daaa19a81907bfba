package config

import (
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
)

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.AdminToken != "" || cfg.Console.CookieSecure || cfg.Console.LoginMaxFailuresPerEmail != 5 || cfg.Console.LoginFailureWindow != 15*time.Minute {
		t.Fatalf("unexpected defaults %+v", cfg.Console)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: map[string]string{
		"PARLEY_ADMIN_TOKEN":                        "short",
		"PARLEY_ADMIN_SESSION_IDLE_TIMEOUT":         "48h",
		"PARLEY_ADMIN_TRUSTED_ORIGINS":              "https://console.example.com,console.example.com",
		"PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_EMAIL": "0",
		"PARLEY_ADMIN_LOGIN_FAILURE_WINDOW":         "0s",
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"PARLEY_ADMIN_TOKEN", "PARLEY_ADMIN_SESSION_IDLE_TIMEOUT", `"console.example.com"`,
		"PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_EMAIL", "PARLEY_ADMIN_LOGIN_FAILURE_WINDOW"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "https://console.example.com\"") {
		t.Errorf("a valid origin was reported:\n%v", err)
	}
}
