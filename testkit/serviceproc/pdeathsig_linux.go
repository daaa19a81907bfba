package serviceproc

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills the child if the caller dies without stopping
// it (a test binary killed by its timeout), so no service outlives it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
