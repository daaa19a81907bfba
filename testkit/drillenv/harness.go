package drillenv

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
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/proccpu"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// Bins are the binaries Main builds, once per test binary, from the
// repository's services (serviceproc.BuildService): the two dispatchers and
// provider-sim, in Dir (which a drill may build more binaries into; Main
// removes it).
var Bins struct {
	Dir                               string
	Campaign, Automation, ProviderSim string
}

var build struct {
	once sync.Once
	err  error
}

// Main builds the binaries, runs the tests of a drill or bench package (its
// TestMain calls it) and removes the binaries afterwards. The build comes
// before the tests, so that their times leave it out.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "parley-drill-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Bins.Dir = dir
	code := 1
	if err := buildBins(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBins builds the binaries once.
func buildBins() error {
	build.once.Do(func() {
		if Bins.Dir == "" {
			build.err = fmt.Errorf("drillenv: the package's TestMain must call drillenv.Main")
			return
		}
		for _, b := range []struct {
			out *string
			bin string
		}{
			{&Bins.Campaign, "campaign-dispatcher"},
			{&Bins.Automation, "automation-dispatcher"},
			{&Bins.ProviderSim, "provider-sim"},
		} {
			*b.out = filepath.Join(Bins.Dir, b.bin)
			if err := serviceproc.BuildService(context.Background(), b.bin, *b.out, os.Stderr); err != nil {
				build.err = err
				return
			}
		}
	})
	return build.err
}

var more struct {
	mu    sync.Mutex
	built map[string]error
}

// Bin builds the named service program (serviceproc.BuildService) into
// Bins.Dir once per test binary, for a drill that runs more services than
// Main builds, and returns its path.
func Bin(t testing.TB, name string) string {
	t.Helper()
	more.mu.Lock()
	defer more.mu.Unlock()
	out := filepath.Join(Bins.Dir, name)
	err, done := more.built[name]
	if !done {
		err = serviceproc.BuildService(context.Background(), name, out, os.Stderr)
		if more.built == nil {
			more.built = map[string]error{}
		}
		more.built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CPUSeconds is the CPU a process has used (proccpu.Own); 0 once it is
// gone.
func CPUSeconds(pid int) float64 {
	d, _ := proccpu.Own(pid)
	return d.Seconds()
}

// PostgresCPUSeconds is the CPU every postgres process on this machine has
// used (the shared server's backends: other users' work included).
func PostgresCPUSeconds() float64 {
	d, _ := proccpu.Command("postgres")
	return d.Seconds()
}

// FreeAddr is a loopback address with a port nobody listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// StartProc runs bin with env (and no PARLEY_* variable of the caller's)
// and waits until probe answers 200. It is SIGKILLed when the test ends,
// and dies with the test process if that dies first; the end of its output
// is logged when the test failed.
func StartProc(t testing.TB, name, bin, probe string, within time.Duration, env ...string) *serviceproc.Process {
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

// SimClient talks to provider-sim's inspection endpoints.
type SimClient struct {
	T    testing.TB
	Base string
}

// Do sends body as JSON and decodes the answer into out; any error or
// status of 300 or more fails the test.
func (s SimClient) Do(method, path string, body any, out any) {
	s.T.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.T.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.Base+path, rd)
	if err != nil {
		s.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.T.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.T.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// MetricLines fetches a Prometheus endpoint and returns the samples of the
// named metrics, one per line.
func MetricLines(t testing.TB, url string, names ...string) string {
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
