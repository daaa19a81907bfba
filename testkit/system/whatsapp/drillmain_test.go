//go:build drill

package whatsapp

import (
	"testing"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// The drills run the real binaries (testkit/drillenv builds the
// dispatchers and provider-sim once, here; the gateway on first use).
func TestMain(m *testing.M) { drillenv.Main(m) }
