//go:build bench

package reports

import (
	"testing"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// The bench runs the real gateway (testkit/drillenv builds it).
func TestMain(m *testing.M) { drillenv.Main(m) }
