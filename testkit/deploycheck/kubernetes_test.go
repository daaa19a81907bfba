package deploycheck

import (
	"testing"

	"github.com/parleyhq/parley/pkg/store"
)

func TestCheckWorkload(t *testing.T) {
	k, err := LoadKubernetes("testdata/k8s")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  any
		want []string
	}{
		{"good", widgetConfig{}, nil},
		{"once", store.Config{}, nil},
		{"missing", widgetConfig{}, []string{`no Deployment or Job "missing"`}},
		{"two-containers", widgetConfig{}, []string{"has 2 containers"}},
		{"bad", widgetConfig{}, []string{
			`takes its environment from ConfigMap "missing", which is not in the base`,
			"sets PARLEY_WIDGT_TOKEN, which deploycheck.widgetConfig does not read",
			"does not set PARLEY_WIDGET_TOKEN, which deploycheck.widgetConfig requires",
			`sets PARLEY_REDIS_ADDR="localhost:6379": loopback in a pod`,
			`does not set PARLEY_POSTGRES_URL, whose default "postgres://postgres@127.0.0.1:5432/parley?sslmode=disable" is loopback`,
			"does not set runAsNonRoot: true",
			"want exactly 8080, where it listens (PARLEY_WIDGET_ADDR)",
			`readiness probe on "/healthz": want /readyz`,
			"readiness probe on port metrics: the service listens on 8080",
			`liveness probe on "/readyz": want /healthz`,
			"liveness probe on port http: the service listens on 8080",
			"terminationGracePeriodSeconds 20s is shorter than PARLEY_DRAIN_DELAY 15s plus the shutdown timeout 20s",
		}},
		{"no-probes", widgetConfig{}, []string{
			"has no HTTP readiness probe",
			"has no HTTP liveness probe",
			// The default grace period (30s) is short of 15s + 20s.
			"terminationGracePeriodSeconds 30s is shorter",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertProblems(t, k.CheckWorkload(tt.name, tt.cfg), tt.want)
		})
	}
}

func TestContainerService(t *testing.T) {
	for image, want := range map[string]string{
		"parley/gateway":                    "gateway",
		"parley/gateway:1.4":                "gateway",
		"parley/admin@sha256:abc":           "admin",
		"registry:5000/parley/gateway:1":    "",
		"nats:2.10":                         "",
		"parley/campaign-dispatcher:latest": "campaign-dispatcher",
	} {
		if got := (Container{Image: image}).Service(); got != want {
			t.Errorf("Service(%q) = %q, want %q", image, got, want)
		}
	}
}
