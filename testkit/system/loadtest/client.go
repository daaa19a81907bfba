// Package loadtest measures the gateway on loopback: it provisions companies
// with keys, drives an endpoint from many keep-alive connections with a lean
// HTTP/1.1 client (so the generator spends little of the machine's CPU), and
// reports throughput and latency percentiles. It also serves the "floor": a
// bare Gin handler doing one redis_rate Allow and one synchronous JetStream
// publish per request, the least any gateway must do.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Request is one prepared request: a key and a body.
type Request struct {
	Key  string
	Body []byte
	// Contacts is how many contacts the body carries (for contacts/s).
	Contacts int
}

// Result is what a run measured. Throughput (ReqPerSec, ContactsSec)
// counts only the expected answer, 202; Wrong says whether any other
// answer came.
type Result struct {
	// Requests is every answer in the window; Accepted the 202s.
	Requests    int
	Accepted    int
	Contacts    int
	Duration    time.Duration
	Statuses    map[int]int
	Errors      int
	P50, P99    time.Duration
	Max         time.Duration
	ReqPerSec   float64
	ContactsSec float64
	// ServerCPU and MachineCPU are the CPU time the server process and the
	// whole machine (every process, the generator included) spent per
	// request in the measured window.
	ServerCPU, MachineCPU time.Duration
	// ByCommand is the CPU per request of every process by command name.
	ByCommand string
}

func (r Result) String() string {
	return fmt.Sprintf("%7.0f req/s %9.0f contacts/s  p50 %6.2f ms  p99 %6.2f ms  max %6.1f ms  cpu/req server %3dµs machine %3dµs  statuses %v errors %d",
		r.ReqPerSec, r.ContactsSec, ms(r.P50), ms(r.P99), ms(r.Max), r.ServerCPU.Microseconds(), r.MachineCPU.Microseconds(), r.Statuses, r.Errors)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Run drives POST path on addr from conns connections for warmup+measure,
// cycling through reqs (connection i starts at i and steps by conns, so
// companies are spread evenly). Only the measure window is counted. pid is
// the server's process, whose CPU time is measured (0: none).
func Run(ctx context.Context, addr, path string, reqs []Request, conns int, warmup, measure time.Duration, pid int) (Result, error) {
	return runWindow(ctx, addr, path, reqs, conns, warmup, measure, pid, nil)
}

// runWindow is Run that also calls window(true) as the measured window
// opens and window(false) as it closes (nil: no call), for callers that
// sample more than the server's CPU.
func runWindow(ctx context.Context, addr, path string, reqs []Request, conns int, warmup, measure time.Duration, pid int, window func(open bool)) (Result, error) {
	type worker struct {
		lat      []time.Duration
		statuses map[int]int
		contacts int
		errs     int
	}
	workers := make([]*worker, conns)
	start := time.Now()
	measureFrom := start.Add(warmup)
	stopAt := measureFrom.Add(measure)
	var meter *cpuMeter
	var spent func() (time.Duration, time.Duration)
	var cmdBefore, cmdAfter map[string]time.Duration
	var meterWG sync.WaitGroup
	meterWG.Add(1)
	go func() {
		defer meterWG.Done()
		time.Sleep(time.Until(measureFrom))
		if window != nil {
			window(true)
		}
		cmdBefore = cpuByCommand()
		meter = startCPU(pid)
		time.Sleep(time.Until(stopAt))
		s0, m0 := meter.spent()
		cmdAfter = cpuByCommand()
		if window != nil {
			window(false)
		}
		spent = func() (time.Duration, time.Duration) { return s0, m0 }
	}()
	var wg sync.WaitGroup
	var dialErr error
	var once sync.Once
	for i := range conns {
		w := &worker{statuses: map[int]int{}, lat: make([]time.Duration, 0, 1<<16)}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(addr)
			if err != nil {
				once.Do(func() { dialErr = err })
				return
			}
			defer c.close()
			buf := make([]byte, 0, 4096)
			for j := i; ctx.Err() == nil; j += conns {
				r := reqs[j%len(reqs)]
				buf = appendRequest(buf[:0], addr, path, r)
				t0 := time.Now()
				if t0.After(stopAt) {
					return
				}
				status, err := c.do(buf)
				t1 := time.Now()
				if err != nil {
					if t0.After(measureFrom) {
						w.errs++
					}
					c.close()
					if c, err = dial(addr); err != nil {
						return
					}
					continue
				}
				if t0.After(measureFrom) && t1.Before(stopAt) {
					w.lat = append(w.lat, t1.Sub(t0))
					w.statuses[status]++
					if status == 202 {
						w.contacts += r.Contacts
					}
				}
			}
		}()
	}
	wg.Wait()
	meterWG.Wait()
	if dialErr != nil {
		return Result{}, dialErr
	}
	res := Result{Statuses: map[int]int{}, Duration: measure}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		res.Contacts += w.contacts
		res.Errors += w.errs
		for s, n := range w.statuses {
			res.Statuses[s] += n
		}
	}
	if len(all) == 0 {
		return res, errors.New("no request completed in the measurement window")
	}
	slices.Sort(all)
	res.Requests = len(all)
	res.P50 = all[len(all)/2]
	res.P99 = all[len(all)*99/100]
	res.Max = all[len(all)-1]
	res.Accepted = res.Statuses[http.StatusAccepted]
	res.ReqPerSec = float64(res.Accepted) / measure.Seconds()
	res.ContactsSec = float64(res.Contacts) / measure.Seconds()
	if server, machine := spent(); pid > 0 {
		res.ServerCPU, res.MachineCPU = server/time.Duration(res.Requests), machine/time.Duration(res.Requests)
	}
	res.ByCommand = breakdown(cmdBefore, cmdAfter, res.Requests)
	return res, nil
}

// Wrong is nil when every request of the window was answered 202, else
// says what else came: a benchmark of wrong answers measures nothing.
func (r Result) Wrong() error { return wrongAnswers(r.Requests+r.Errors, r.Statuses, r.Errors) }

func wrongAnswers(total int, statuses map[int]int, errs int) error {
	bad := map[int]int{}
	n := errs
	for s, c := range statuses {
		if s != http.StatusAccepted {
			bad[s] = c
			n += c
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d requests were not answered 202: statuses %v, connection errors %d", n, total, bad, errs)
}

func appendRequest(b []byte, host, path string, r Request) []byte {
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Type: application/json\r\nservice-api-key: "...)
	b = append(b, r.Key...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(r.Body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, r.Body...)
}

type conn struct {
	nc net.Conn
	br *bufio.Reader
}

func dial(addr string) (*conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}, nil
}

func (c *conn) close() { _ = c.nc.Close() }

var contentLength = []byte("content-length:")

// do writes one request and reads one response (status line, headers, a
// Content-Length body), which is all the gateway and the floor send.
func (c *conn) do(req []byte) (int, error) {
	if _, err := c.nc.Write(req); err != nil {
		return 0, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if len(h) > len(contentLength) && bytes.EqualFold(h[:len(contentLength)], contentLength) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(h[len(contentLength):])))
			if err != nil {
				return 0, fmt.Errorf("bad content-length %q", h)
			}
		}
	}
	if length < 0 {
		return 0, errors.New("response without Content-Length")
	}
	if _, err := c.br.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

// Load is the statuses of a paced run.
type Load struct {
	Requests int
	Statuses map[int]int
	Errors   int
	Duration time.Duration
}

// Wrong is nil when every request of the load was answered 202.
func (l Load) Wrong() error { return wrongAnswers(l.Requests, l.Statuses, l.Errors) }

func (l Load) String() string {
	return fmt.Sprintf("%d requests in %s (%.0f req/s), statuses %v, errors %d",
		l.Requests, l.Duration.Round(time.Millisecond), float64(l.Requests)/l.Duration.Seconds(), l.Statuses, l.Errors)
}

// Pace drives POST path on addr from conns connections until ctx ends, at
// about rate requests per second in all (each connection sends on its own
// schedule and skips the ticks it fell behind on), cycling through reqs.
// Unlike Run it is a background load, not a measurement of capacity.
func Pace(ctx context.Context, addr, path string, reqs []Request, conns int, rate float64) (Load, error) {
	interval := time.Duration(float64(conns) / rate * float64(time.Second))
	loads := make([]Load, conns)
	errs := make([]error, conns)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := Load{Statuses: map[int]int{}}
			defer func() { loads[i] = l }()
			c, err := dial(addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { c.close() }()
			buf := make([]byte, 0, 4096)
			// Stagger the connections across one interval.
			next := start.Add(interval * time.Duration(i) / time.Duration(conns))
			for j := i; ; j += conns {
				if wait := time.Until(next); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				} else if ctx.Err() != nil {
					return
				}
				if next = next.Add(interval); time.Until(next) < 0 {
					next = time.Now()
				}
				buf = appendRequest(buf[:0], addr, path, reqs[j%len(reqs)])
				status, err := c.do(buf)
				l.Requests++
				if err != nil {
					l.Errors++
					c.close()
					if c, err = dial(addr); err != nil {
						errs[i] = err
						return
					}
					continue
				}
				l.Statuses[status]++
			}
		}()
	}
	wg.Wait()
	total := Load{Statuses: map[int]int{}, Duration: time.Since(start)}
	for _, l := range loads {
		total.Requests += l.Requests
		total.Errors += l.Errors
		for s, n := range l.Statuses {
			total.Statuses[s] += n
		}
	}
	return total, errors.Join(errs...)
}
