//go:build !bench

package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (not
// with the bench tag: bench_test.go has its own TestMain).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
