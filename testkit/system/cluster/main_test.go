//go:build drill

package cluster

import (
	"testing"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// TestMain builds the dispatchers and provider-sim the cluster drill runs
// (testkit/drillenv); the gateway is built beside them on first use.
func TestMain(m *testing.M) { drillenv.Main(m) }
