package httpapi

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/gateway/internal/auth"
)

type anyKey struct{}

func (anyKey) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{CompanyID: 42}, nil
}

type noLimit struct{}

func (noLimit) Allow(context.Context, string, ratelimit.Limit) ratelimit.Result {
	return ratelimit.Result{Allowed: true}
}

// fakeExport yields rows rows, gap apart; with release, it waits for it
// before row waitAt; with fail, it fails before row failAt.
type fakeExport struct {
	rows    int
	gap     time.Duration
	fail    bool
	failAt  int
	release chan struct{}
	waitAt  int
}

func (f *fakeExport) Filename() string { return "campaign-7-spring_2026-11-01_2026-11-30.csv" }

func (f *fakeExport) Each(ctx context.Context, fn func(*record.ExportRow) error) (int64, error) {
	for i := range f.rows {
		if f.fail && i == f.failAt {
			return int64(i), errors.New("the database went away")
		}
		if i == f.waitAt && f.release != nil {
			select {
			case <-f.release:
			case <-ctx.Done():
				return int64(i), ctx.Err()
			}
		}
		if i > 0 {
			time.Sleep(f.gap)
		}
		if err := ctx.Err(); err != nil {
			return int64(i), err // as a query would be cancelled
		}
		r := record.ExportRow{MessageID: int64(100 + i), BatchID: "0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de", Kind: "campaign",
			Campaign: "Spring, =sale", Phone: "+393331234567", State: record.StateDelivered, CreatedAt: time.Unix(0, 0)}
		if err := fn(&r); err != nil {
			return int64(i), err
		}
	}
	return int64(f.rows), nil
}

// fakeExports opens e, or fails with err, and keeps the queries.
type fakeExports struct {
	mu      sync.Mutex
	e       *fakeExport
	err     error
	queries []record.ExportQuery
}

func (f *fakeExports) OpenExport(_ context.Context, q record.ExportQuery) (MessageExport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, f.err
	}
	return f.e, nil
}

func (f *fakeExports) last() record.ExportQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[len(f.queries)-1]
}

// exportServer is the API on a real HTTP server with the given timeouts
// (the gateway's are 30 s), exporting through x.
func exportServer(t *testing.T, x *fakeExports, timeout time.Duration, maxExports int) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	h := New(Config{MaxBodyBytes: 1 << 20, MaxExports: maxExports}, Deps{Auth: anyKey{}, Limiter: noLimit{}, Exports: x,
		Metrics: prometheus.NewRegistry(), Log: zap.NewNop()})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("service-api-key", "service_x_y")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestExportStreams: the status, the headers, the header row and the rows
// read so far reach the client while the export is still reading (a flush
// at least every second); the file is RFC 4180 with its formula-like cells
// neutralised.
func TestExportStreams(t *testing.T) {
	release := make(chan struct{})
	x := &fakeExports{e: &fakeExport{rows: 3, gap: csvexport.FlushEvery + 100*time.Millisecond, release: release, waitAt: 2}}
	srv := exportServer(t, x, 30*time.Second, 1)
	resp := get(t, srv, "/api/campaigns/7/export?from=2026-11-01T00:00:00Z&to=2026-11-30T00:00:00%2B01:00")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename="campaign-7-spring_2026-11-01_2026-11-30.csv"` ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	q := x.last()
	if q.CompanyID != 42 || q.Scope != record.ExportCampaign || q.SubjectID != 7 ||
		!q.From.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !q.To.Equal(time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)) {
		t.Fatalf("query %+v", q)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 3 { // the header row and two rows, before the export goes on
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(rest))).ReadAll()
	if err != nil || len(rows) != 1 {
		t.Fatalf("the rest: %q, %v", rest, err)
	}
	if rows[0][0] != "102" || rows[0][3] != "Spring, =sale" || rows[0][7] != "'+393331234567" || rows[0][11] != "1970-01-01T00:00:00Z" {
		t.Fatalf("row %q", rows[0])
	}
}

// TestExportErrorCutsTheConnection: an error after the first bytes leaves
// the client with a failed download, never a short file that ends well.
func TestExportErrorCutsTheConnection(t *testing.T) {
	srv := exportServer(t, &fakeExports{e: &fakeExport{rows: 10, fail: true, failAt: 2}}, 30*time.Second, 1)
	resp := get(t, srv, "/api/exports/messages")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %q, error %v: want an unexpected EOF", body, err)
	}
	if !strings.HasPrefix(string(body), "message_id,batch_id,") {
		t.Fatalf("before the cut: %q", body)
	}
}

// TestExportOutlivesServerTimeouts: a download longer than the server's
// read and write timeouts (made short here) completes: the write deadline
// moves on with the rows.
func TestExportOutlivesServerTimeouts(t *testing.T) {
	srv := exportServer(t, &fakeExports{e: &fakeExport{rows: 6, gap: 300 * time.Millisecond}}, 500*time.Millisecond, 1)
	start := time.Now()
	resp := get(t, srv, "/api/batches/0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de/export")
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(rows) != 7 {
		t.Fatalf("%d rows after %v: %v", len(rows), time.Since(start), err)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("took %v: the export was not slower than the timeouts", took)
	}
}

// TestExportRefusals: 422 for a range refused, in the spec's shape; 404
// for what the company does not have; 503 when every slot is taken; all
// before any CSV.
func TestExportRefusals(t *testing.T) {
	x := &fakeExports{e: &fakeExport{rows: 1}}
	srv := exportServer(t, x, 30*time.Second, 1)
	body := func(resp *http.Response) string {
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	cases := []struct {
		path   string
		err    error
		status int
		body   string
	}{
		{"/api/exports/messages?from=yesterday", nil, 422, `{"detail":[{"type":"datetime_from_date_parsing","loc":["query","from"],` +
			`"msg":"Input should be a valid datetime with a timezone, as 2026-12-01T09:30:00Z","input":"yesterday"}]}`},
		{"/api/exports/messages?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z",
			&record.InvalidError{Field: "from", Msg: "from must be before to"}, 422,
			`{"detail":[{"type":"value_error","loc":["query","from"],"msg":"Value error, from must be before to","input":"2026-11-02T00:00:00Z"}]}`},
		{"/api/campaigns/7/export", record.ErrNotFound, 404, `{"detail":"Campaign not found"}`},
		{"/api/campaigns/seven/export", nil, 404, `{"detail":"Campaign not found"}`},
		{"/api/automations/0/export", nil, 404, `{"detail":"Automation not found"}`},
		{"/api/automations/4/export", record.ErrNotFound, 404, `{"detail":"Automation not found"}`},
		{"/api/batches/nope/export", record.ErrNotFound, 404, `{"detail":"Batch not found"}`},
		{"/api/exports/messages", record.ErrStreamUnreadable, 503, ""},
	}
	for _, c := range cases {
		x.err = c.err
		resp := get(t, srv, c.path)
		got := body(resp)
		if resp.StatusCode != c.status || (c.body != "" && got != c.body) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s (%s)", c.path, resp.StatusCode, got, resp.Header.Get("Content-Type"))
		}
	}
	x.err = nil

	// A failure before the first row is still an answer.
	x.e = &fakeExport{rows: 3, fail: true}
	if r := get(t, srv, "/api/exports/messages"); r.StatusCode != 503 || r.Header.Get("Retry-After") != "1" ||
		r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("failed before a row: %d %v", r.StatusCode, r.Header)
	} else {
		body(r)
	}
	x.e = &fakeExport{rows: 1}

	// The range: to defaults to now, from to 30 days before it.
	before := time.Now()
	// Read to its end: the export's slot is free once its body has ended.
	body(get(t, srv, "/api/exports/messages"))
	q := x.last()
	if q.Scope != record.ExportAll || q.To.Before(before) || q.To.After(time.Now()) || q.To.Sub(q.From) != record.DefaultExportRange {
		t.Fatalf("default range: %+v", q)
	}

	// One slot: a second export while the first runs is 503.
	release := make(chan struct{})
	x.e = &fakeExport{rows: 2, release: release, waitAt: 1}
	first := get(t, srv, "/api/exports/messages")
	if _, err := bufio.NewReader(first.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	busy := get(t, srv, "/api/automations/4/export")
	if b := body(busy); busy.StatusCode != 503 || busy.Header.Get("Retry-After") != "10" || b != `{"detail":"`+msgExportsBusy+`"}` {
		t.Fatalf("busy: %d %s", busy.StatusCode, b)
	}
	close(release)
	if _, err := io.ReadAll(first.Body); err != nil {
		t.Fatal(err)
	}
	if again := get(t, srv, "/api/automations/4/export"); again.StatusCode != 200 {
		t.Fatalf("after the first ended: %d", again.StatusCode)
	}
}
