package config

import (
	"testing"

	"github.com/parleyhq/parley/testkit/deploycheck"
)

// docker-compose.yml runs provider-sim with this configuration: the
// variables it sets exist here, its port and healthcheck match the listen
// address (testkit/deploycheck says what is checked). deploy/k8s does not deploy
// it: production talks to the WhatsApp Cloud API.
func TestComposeService(t *testing.T) {
	deploycheck.ComposeService(t, "provider-sim", Config{})
}
