//go:build drill || bench

package campaign

import (
	"testing"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// The drills and the campaign part of the delivery bench run the real
// binaries (testkit/drillenv builds them once, here).
func TestMain(m *testing.M) { drillenv.Main(m) }
