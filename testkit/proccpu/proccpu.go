// Package proccpu reads the CPU time processes have used from /proc
// (Linux), per process tree, so that a load test on a busy, shared machine
// can say what each of its processes cost per unit of work: gateway-bench
// capacity (testkit/system/loadtest) and the delivery bench
// (testkit/system/campaign/bench_test.go) use it.
package proccpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// procStat is what Tree reads of one process.
type procStat struct {
	comm string
	ppid int
	// own is utime+stime; children is cutime+cstime, the CPU of the
	// children it has waited for (ended ones, such as PostgreSQL backends
	// of closed connections, reaped by the postmaster).
	own, children time.Duration
}

func readProcStats() (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended in between
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 15 {
			continue
		}
		var v [5]int64
		for j, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
			if v[j], err = strconv.ParseInt(f[k], 10, 64); err != nil {
				return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
			}
		}
		tick := time.Second / clockTicks
		comm := ""
		if j := strings.IndexByte(s, '('); j >= 0 && j < i {
			comm = s[j+1 : i]
		}
		out[pid] = procStat{comm: comm, ppid: int(v[0]), own: time.Duration(v[1]+v[2]) * tick, children: time.Duration(v[3]+v[4]) * tick}
	}
	return out, nil
}

// Tree is the CPU time used so far by each named process and all its
// descendants, living or ended (ended ones count once their parent has
// waited for them, which PostgreSQL's postmaster does at once). A process
// already gone is an error: its figure would be wrong.
func Tree(roots map[string]int) (map[string]time.Duration, error) {
	stats, err := readProcStats()
	if err != nil {
		return nil, err
	}
	kids := map[int][]int{}
	for pid, st := range stats {
		kids[st.ppid] = append(kids[st.ppid], pid)
	}
	out := map[string]time.Duration{}
	for name, root := range roots {
		if _, ok := stats[root]; !ok {
			return nil, fmt.Errorf("%s (pid %d) is gone", name, root)
		}
		var total time.Duration
		stack := []int{root}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			st := stats[pid]
			total += st.own + st.children
			stack = append(stack, kids[pid]...)
		}
		out[name] = total
	}
	return out, nil
}

// Own is the CPU time one process has used so far, without its living
// descendants (those it has waited for included, as in Tree): for a test
// process whose children are measured as roots of their own.
func Own(pid int) (time.Duration, error) {
	stats, err := readProcStats()
	if err != nil {
		return 0, err
	}
	st, ok := stats[pid]
	if !ok {
		return 0, fmt.Errorf("pid %d is gone", pid)
	}
	return st.own + st.children, nil
}

// Command is the CPU time used so far by every process named comm on the
// machine (its own time only, as /proc/<pid>/comm names it): for a shared
// server, such as the local PostgreSQL, whose processes no test started.
// Other users' work on that server is included.
func Command(comm string) (time.Duration, error) {
	stats, err := readProcStats()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, st := range stats {
		if st.comm == comm {
			total += st.own
		}
	}
	return total, nil
}
