package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/deploycheck"
)

// docker-compose.yml runs admin with this configuration, and the one-shot
// migrate service (parleyctl migrate, from the admin image) with the
// PostgreSQL part of it (testkit/deploycheck says what is checked).
func TestComposeService(t *testing.T) {
	deploycheck.ComposeService(t, "admin", Config{})
	deploycheck.ComposeService(t, "migrate", store.Config{})
}

// deploy/k8s runs admin with this configuration, and the migrate Job with
// the PostgreSQL part of it.
func TestKubernetesWorkload(t *testing.T) {
	deploycheck.KubernetesWorkload(t, "admin", Config{})
	deploycheck.KubernetesWorkload(t, "migrate", store.Config{})
}
