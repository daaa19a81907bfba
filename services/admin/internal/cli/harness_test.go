package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/storetest"
)

// stack is what a CLI test runs against: its own migrated database and its
// own embedded NATS server, and the invalidations published on it.
type stack struct {
	t       *testing.T
	dbURL   string
	pool    *pgxpool.Pool
	nats    *bustest.Server
	busCfg  bus.Config
	environ []string

	mu   sync.Mutex
	invs []bus.Invalidation
}

func newStack(t *testing.T) *stack {
	t.Helper()
	dbURL, pool := storetest.NewDatabase(t)
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	s := &stack{t: t, dbURL: dbURL, pool: pool, nats: srv, busCfg: cfg}
	s.environ = []string{
		"PARLEY_POSTGRES_URL=" + dbURL,
		"PARLEY_NATS_URL=" + cfg.URL,
		"PARLEY_NATS_STREAM=" + cfg.Stream,
		"PARLEY_NATS_SUBJECT_PREFIX=" + cfg.Prefix,
		"PARLEY_CLI_PUBLISH_TIMEOUT=2s",
	}
	nc, err := bus.Connect(cfg, "cli-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := bus.SubscribeInvalidations(nc, cfg, func(inv bus.Invalidation) {
		s.mu.Lock()
		s.invs = append(s.invs, inv)
		s.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

type result struct {
	code           int
	stdout, stderr string
}

// run calls parleyctl's entry point in process, as a shell would.
func (s *stack) run(stdin string, args ...string) result {
	s.t.Helper()
	return runCLI(s.t, s.environ, stdin, args...)
}

func runCLI(t *testing.T, environ []string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, args, environ, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs a command that must succeed.
func (s *stack) ok(args ...string) result {
	s.t.Helper()
	r := s.run("", args...)
	if r.code != 0 {
		s.t.Fatalf("parleyctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// jsonOK runs a command with --json that must succeed and decodes its stdout.
func (s *stack) jsonOK(into any, args ...string) {
	s.t.Helper()
	r := s.ok(append(args, "--json")...)
	decodeJSON(s.t, r.stdout, into)
}

func decodeJSON(t *testing.T, stdout string, into any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("stdout is not the expected JSON (%v):\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value:\n%s", stdout)
	}
	var generic any
	if err := json.Unmarshal([]byte(stdout), &generic); err != nil {
		t.Fatal(err)
	}
	if bad := notSnakeCase(generic); bad != "" {
		t.Fatalf("JSON key %q is not snake_case:\n%s", bad, stdout)
	}
}

var snakeRe = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// notSnakeCase returns the first object key that is not snake_case.
func notSnakeCase(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !snakeRe.MatchString(k) {
				return k
			}
			if bad := notSnakeCase(x); bad != "" {
				return bad
			}
		}
	case []any:
		for _, x := range v {
			if bad := notSnakeCase(x); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// fails runs a command that must exit with code and mention want on stderr.
func (s *stack) fails(code int, want string, args ...string) result {
	s.t.Helper()
	return s.failsWithInput("", code, want, args...)
}

func (s *stack) failsWithInput(stdin string, code int, want string, args ...string) result {
	s.t.Helper()
	r := s.run(stdin, args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		s.t.Fatalf("parleyctl %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
	if r.stdout != "" {
		s.t.Fatalf("parleyctl %s failed but wrote to stdout: %q", strings.Join(args, " "), r.stdout)
	}
	return r
}

// waitInvalidations waits until every want was published.
func (s *stack) waitInvalidations(want ...bus.Invalidation) {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := append([]bus.Invalidation(nil), s.invs...)
		s.mu.Unlock()
		missing := 0
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("invalidations %v not all published; got %v", want, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stack) invalidations() []bus.Invalidation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bus.Invalidation(nil), s.invs...)
}

// company creates a company and returns its id.
func (s *stack) company(slug string, extra ...string) int64 {
	s.t.Helper()
	var c struct {
		ID int64 `json:"id"`
	}
	r := s.ok(append([]string{"companies", "create", "--slug", slug, "--json"}, extra...)...)
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		s.t.Fatal(err)
	}
	return c.ID
}

func (s *stack) count(table string) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}
