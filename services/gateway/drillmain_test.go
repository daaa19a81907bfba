//go:build drill

package main

import (
	"testing"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// With the drill tag, TestMain builds the binaries the cluster drill runs
// (testkit/drillenv) instead of leak_test.go's goroutine check, which
// TestDrillSegment50k makes itself.
func TestMain(m *testing.M) { drillenv.Main(m, "..") }
