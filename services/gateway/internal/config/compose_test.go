package config

import (
	"testing"

	"github.com/parleyhq/parley/testkit/deploycheck"
)

// docker-compose.yml runs gateway with this configuration: the variables it
// sets exist here, its servers are not loopback, its port and healthcheck
// match the listen address (testkit/deploycheck says what is checked).
func TestComposeService(t *testing.T) {
	deploycheck.ComposeService(t, "gateway", Config{})
}

// deploy/k8s runs gateway with this configuration: environment, port, probes
// and the grace period that the drain needs.
func TestKubernetesWorkload(t *testing.T) {
	deploycheck.KubernetesWorkload(t, "gateway", Config{})
}
