//go:build !linux

package serviceproc

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; there
// Stop is what ends the child.
func setParentDeathSignal(*exec.Cmd) {}
