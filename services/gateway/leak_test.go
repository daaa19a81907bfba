//go:build !drill

package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (with
// the drill tag drillmain_test.go is the TestMain).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
