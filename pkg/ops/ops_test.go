package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parleyhq/parley/pkg/ops"
)

func readyz(t *testing.T, p *ops.Probe) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, body
}

// TestReadyzOptionalChecks: a failing required check makes /readyz 503; a
// failing optional one is named under "degraded" and leaves it 200.
func TestReadyzOptionalChecks(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	for _, tt := range []struct {
		name       string
		checks     []ops.Check
		code       int
		failed     []string
		degraded   []string
		wantStatus string
	}{
		{"all up", []ops.Check{{Name: "postgres", Ping: ok}, {Name: "redis", Ping: ok, Optional: true}}, 200, nil, nil, "ready"},
		{"optional down", []ops.Check{{Name: "postgres", Ping: ok}, {Name: "redis", Ping: down, Optional: true}}, 200, nil, []string{"redis"}, "ready"},
		{"required down", []ops.Check{{Name: "postgres", Ping: down}, {Name: "redis", Ping: ok, Optional: true}}, 503, []string{"postgres"}, nil, "unavailable"},
		{"both down", []ops.Check{{Name: "postgres", Ping: down}, {Name: "redis", Ping: down, Optional: true}}, 503, []string{"postgres"}, []string{"redis"}, "unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := readyz(t, ops.NewProbe(tt.checks...))
			if code != tt.code || body["status"] != tt.wantStatus {
				t.Fatalf("%d %v, want %d %s", code, body, tt.code, tt.wantStatus)
			}
			for key, want := range map[string][]string{"failed": tt.failed, "degraded": tt.degraded} {
				got, _ := body[key].(map[string]any)
				if len(got) != len(want) {
					t.Fatalf("%s = %v, want %v", key, got, want)
				}
				for _, name := range want {
					if got[name] != "connection refused" {
						t.Fatalf("%s = %v, want %s named with its error", key, got, name)
					}
				}
			}
		})
	}
}
