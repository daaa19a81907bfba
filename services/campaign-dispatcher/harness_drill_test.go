//go:build drill || bench

package main

// The drills and the delivery bench run the real binaries (this
// dispatcher, the automation dispatcher and provider-sim), built once in
// TestMain, against an embedded NATS, the local Redis under a key prefix of
// their own, and a fresh database (or a private PostgreSQL cluster).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/serviceproc"
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
		out      *string
		dir, bin string
	}{
		{&bins.campaign, ".", "campaign-dispatcher"},
		{&bins.automation, "../automation-dispatcher", "automation-dispatcher"},
		{&bins.providerSim, "../provider-sim", "provider-sim"},
	} {
		*b.out = filepath.Join(dir, b.bin)
		if err := serviceproc.Build(context.Background(), b.dir, *b.out, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
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
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startProc runs bin with env (and no PARLEY_* variable of the caller's)
// and waits until probe answers 200. It is SIGKILLed when the test ends,
// and dies with the test process if that dies first; the end of its output
// is logged when the test failed.
func startProc(t testing.TB, name, bin, probe string, within time.Duration, env ...string) *serviceproc.Process {
	t.Helper()
	p, err := serviceproc.Start(context.Background(), serviceproc.Options{Name: name, Bin: bin, Env: env,
		Probe: probe, StartTimeout: within})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
			t.Logf("--- last lines of %s ---\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return p
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
