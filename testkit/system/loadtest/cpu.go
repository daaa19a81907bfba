package loadtest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/testkit/proccpu"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// processCPU is the CPU time (user + system) pid has used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may hold spaces) start after ") ".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// machineCPU is the busy CPU time of the whole machine so far (every core).
func machineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat")
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// cpuMeter samples the server's and the machine's CPU around a run.
type cpuMeter struct {
	pid             int
	server, machine time.Duration
}

func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid}
	m.server, _ = processCPU(pid)
	m.machine, _ = machineCPU()
	return m
}

// spent is the CPU the server and the whole machine used since startCPU.
func (m *cpuMeter) spent() (server, machine time.Duration) {
	if m.pid > 0 {
		s, _ := processCPU(m.pid)
		server = s - m.server
	}
	mc, _ := machineCPU()
	return server, mc - m.machine
}

// cpuByCommand is the CPU time used so far by every process, summed by
// command name (nats-server, redis-server, postgres, ...). Processes that
// ended in between are missed, which a load test's long-lived servers are not.
func cpuByCommand() map[string]time.Duration {
	out := map[string]time.Duration{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		cpu, err := processCPU(pid)
		if err != nil {
			continue
		}
		out[s[open+1:end]] += cpu
	}
	return out
}

// breakdown renders per-request CPU by command between two samples, the
// largest first, omitting commands under 1µs per request.
func breakdown(before, after map[string]time.Duration, requests int) string {
	type row struct {
		cmd string
		per time.Duration
	}
	var rows []row
	for cmd, t := range after {
		if d := (t - before[cmd]) / time.Duration(max(requests, 1)); d >= time.Microsecond {
			rows = append(rows, row{cmd, d})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.per - a.per) })
	var sb strings.Builder
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %dµs", r.cmd, r.per.Microseconds())
	}
	return sb.String()
}

// treeCPU is proccpu.Tree (testkit/proccpu, shared with the delivery
// bench): the CPU of each named process and all its descendants.
func treeCPU(roots map[string]int) (map[string]time.Duration, error) { return proccpu.Tree(roots) }
