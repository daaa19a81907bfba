package config

import (
	"testing"

	"github.com/parleyhq/parley/testkit/deploycheck"
)

// docker-compose.yml runs each dispatcher command with its configuration:
// the variables it sets exist there, its servers are not loopback, its port
// and healthcheck match the listen address (testkit/deploycheck says what is
// checked).
func TestComposeService(t *testing.T) {
	deploycheck.ComposeService(t, "campaign-dispatcher", Campaign{})
	deploycheck.ComposeService(t, "automation-dispatcher", Automation{})
}

// deploy/k8s runs each dispatcher command with its configuration:
// environment, port, probes and the grace period that the drain needs.
func TestKubernetesWorkload(t *testing.T) {
	deploycheck.KubernetesWorkload(t, "campaign-dispatcher", Campaign{})
	deploycheck.KubernetesWorkload(t, "automation-dispatcher", Automation{})
}
