//go:build !linux

package ratelimittest

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; there the
// test's cleanup is what stops the server.
func setParentDeathSignal(*exec.Cmd) {}
