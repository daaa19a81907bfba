//go:build drill || bench

package main

// The drills and the delivery bench run the real binaries (this
// dispatcher, the automation dispatcher and provider-sim), built once in
// TestMain, against an embedded NATS, the local Redis under a key prefix of
// their own, and a fresh database (or a private PostgreSQL cluster).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var bins struct {
	dir                               string
	campaign, automation, providerSim string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "parley-drill-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.dir = dir
	for _, b := range []struct {
		out *string
		pkg string
	}{
		{&bins.campaign, "."}, {&bins.automation, "../automation-dispatcher"}, {&bins.providerSim, "../provider-sim"},
	} {
		*b.out = filepath.Join(dir, filepath.Base(filepath.Clean(b.pkg)))
		if b.pkg == "." {
			*b.out = filepath.Join(dir, "campaign-dispatcher")
		}
		cmd := exec.Command("go", "build", "-o", *b.out, b.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b.pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr is a loopback address with a port nobody listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// proc is a child process whose output goes to a log file; it is killed
// when the test ends, and dies with the test process if that dies first.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(t testing.TB, name, bin string, env ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{t: t, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.tail(40)
		}
	})
	return p
}

// kill is SIGKILL: no shutdown at all.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) tail(n int) {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	p.t.Logf("--- last lines of %s ---\n%s", p.name, strings.Join(lines, "\n"))
}

// waitHTTP waits until GET url answers 200.
func waitHTTP(t testing.TB, url string, within time.Duration, p *proc) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p != nil && p.exited() {
			t.Fatalf("%s exited: %v", p.name, p.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s: %v", url, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// simClient talks to provider-sim's inspection endpoints.
type simClient struct {
	t    testing.TB
	base string
}

func (s simClient) do(method, path string, body any, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// metricLines fetches a Prometheus endpoint and returns the samples of the
// named metrics, one per line.
func metricLines(t testing.TB, url string, names ...string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		for _, n := range names {
			if strings.HasPrefix(line, n) {
				out = append(out, line)
			}
		}
	}
	return "\n" + strings.Join(out, "\n")
}
