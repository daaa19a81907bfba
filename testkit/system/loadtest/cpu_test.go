package loadtest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// treeCPU counts a process's descendants, ended ones included: a subshell
// that burned CPU and was waited for is in the shell's figure, not in the
// shell's own CPU time.
func TestTreeCPUCountsEndedDescendants(t *testing.T) {
	// The child (this test binary, as TestHelperSpin) spins for 300 ms of
	// CPU time (not wall time); then the shell says so and sleeps.
	cmd := exec.Command("sh", "-c", `"$0" -test.run='^TestHelperSpin$' >/dev/null; echo burned; sleep 60`, os.Args[0])
	cmd.Env = append(os.Environ(), "LOADTEST_SPIN=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "burned" {
		t.Fatalf("child said %q, %v", line, err)
	}
	pid := cmd.Process.Pid
	tree, err := treeCPU(map[string]int{"sh": pid})
	if err != nil {
		t.Fatal(err)
	}
	own, err := processCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if tree["sh"] < 250*time.Millisecond {
		t.Errorf("tree CPU %s, want at least the subshell's 300 ms", tree["sh"])
	}
	if own >= tree["sh"]-200*time.Millisecond {
		t.Errorf("the shell's own CPU %s should not hold the subshell's (tree %s)", own, tree["sh"])
	}
}

func TestTreeCPURefusesAGoneProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := treeCPU(map[string]int{"true": cmd.Process.Pid}); err == nil {
		t.Fatal("no error for a process that has ended")
	}
}

// TestHelperSpin is the child of TestTreeCPUCountsEndedDescendants.
func TestHelperSpin(t *testing.T) {
	if os.Getenv("LOADTEST_SPIN") != "1" {
		t.Skip("only as the child of TestTreeCPUCountsEndedDescendants")
	}
	start, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for {
		now, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-start >= 300*time.Millisecond {
			return
		}
	}
}
