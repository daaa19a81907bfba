//go:build bench

package reports

// make bench-reports: a campaign report over ten million messages through
// the real gateway binary, under 300 ms.
//
// The messages are written with SQL (a month of 200 sends, their states
// spread as a real campaign's: read, delivered, sent, failed with two
// codes, skipped, a share replied and billed), into the real table with
// all its indexes; the counters are then built from them by
// record.RebuildReports, the function an operator runs (the live writers
// are held to the same function by pkg/record's tests). The bench then
// reads the report by day over the month and by hour over a week, through
// GET /api/campaigns/{id}/report, and prints p50, p99 and max; it compares
// every total with a count of the messages themselves (timed too: the
// query a report does not run) and fails on a difference or on a p99 over
// 300 ms. PARLEY_BENCH_REPORT_MESSAGES changes the size.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/drillenv"
)

const (
	defaultMessages = 10_000_000
	sends           = 200
	reads           = 50
	target          = 300 * time.Millisecond
)

func TestBenchReports(t *testing.T) {
	total := defaultMessages
	if v := os.Getenv("PARLEY_BENCH_REPORT_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < sends {
			t.Fatalf("PARLEY_BENCH_REPORT_MESSAGES=%q: want a number of at least %d", v, sends)
		}
		total = n
	}
	e := drillenv.New(t, drillenv.Options{})
	s := e.NewSender("reports", 1000)
	key, _, err := apikey.NewStore(e.Pool, nil).Create(e.Ctx, s.Company.ID, apikey.Actor{Label: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC().Truncate(24 * time.Hour)
	start := end.AddDate(0, 0, -30)

	t0 := time.Now()
	fill(t, e, s, total, start, end)
	t.Logf("%d messages in %d sends over 30 days written in %s", total, sends, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	rows, err := record.RebuildReports(e.Ctx, e.Pool, s.Company.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters rebuilt from the messages in %s: %d report_hours rows", time.Since(t0).Round(time.Millisecond), rows)
	if _, err := e.Pool.Exec(e.Ctx, `VACUUM ANALYZE report_hours`); err != nil {
		t.Fatal(err)
	}

	// What the messages say, counted the slow way.
	t0 = time.Now()
	var truth struct{ accepted, sent, delivered, read, replied, failed, skipped, billable int64 }
	if err := e.Pool.QueryRow(e.Ctx, `
		SELECT count(*), count(m.sent_at), count(m.delivered_at), count(m.read_at), count(m.replied_at),
			count(*) FILTER (WHERE m.state = 'failed'), count(*) FILTER (WHERE m.state = 'skipped_opt_out'),
			count(*) FILTER (WHERE m.billable AND m.delivered_at IS NOT NULL)
		FROM messages m JOIN batches b ON b.id = m.batch_id WHERE b.campaign_id = $1`, s.Camp.ID).Scan(
		&truth.accepted, &truth.sent, &truth.delivered, &truth.read, &truth.replied, &truth.failed, &truth.skipped, &truth.billable); err != nil {
		t.Fatal(err)
	}
	counted := time.Since(t0)
	t.Logf("counting the campaign's messages instead: %s", counted.Round(time.Millisecond))

	_, gw := e.StartGateway()
	for _, c := range []struct {
		name     string
		from     time.Time
		interval string
		points   int
	}{
		{"by day over 30 days", start, record.IntervalDay, 30},
		{"by hour over 7 days", end.AddDate(0, 0, -7), record.IntervalHour, 168},
	} {
		q := url.Values{"from": {c.from.Format(time.RFC3339)}, "to": {end.Format(time.RFC3339)}, "interval": {c.interval}}
		u := fmt.Sprintf("%s/api/campaigns/%d/report?%s", gw, s.Camp.ID, q.Encode())
		var ms []float64
		var rep record.Report
		for i := 0; i < reads; i++ {
			t1 := time.Now()
			body := get(t, u, key)
			ms = append(ms, float64(time.Since(t1).Microseconds())/1000)
			if i == 0 {
				if err := json.Unmarshal(body, &rep); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(210 * time.Millisecond) // the route's 5 a second
		}
		slices.Sort(ms)
		p50, p99, maxMS := ms[len(ms)/2], ms[min(len(ms)-1, len(ms)*99/100)], ms[len(ms)-1]
		t.Logf("report %s (%d points): p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d reads", c.name, len(rep.Series), p50, p99, maxMS, reads)
		if len(rep.Series) != c.points {
			t.Errorf("%s: %d points, want %d", c.name, len(rep.Series), c.points)
		}
		if time.Duration(p99*float64(time.Millisecond)) > target {
			t.Errorf("%s: p99 %.1f ms, target %s", c.name, p99, target)
		}
		if c.interval == record.IntervalDay {
			got := []int64{rep.Accepted, rep.Sent, rep.Delivered, rep.Read, rep.Replied, rep.Failed, rep.SkippedOptOut, rep.Billable}
			want := []int64{truth.accepted, truth.sent, truth.delivered, truth.read, truth.replied, truth.failed, truth.skipped, truth.billable}
			t.Logf("report totals %v; the messages say %v", got, want)
			if !slices.Equal(got, want) {
				t.Errorf("the report's totals differ from the messages")
			}
			if rep.Accepted != int64(total) {
				t.Errorf("the report counts %d accepted, want %d", rep.Accepted, total)
			}
		}
	}
}

// fill writes total messages of the sender's campaign in sends batches
// spread over [start, end), one statement per batch.
func fill(t *testing.T, e *drillenv.Env, s drillenv.Sender, total int, start, end time.Time) {
	t.Helper()
	per := total / sends
	step := end.Sub(start) / sends
	for i := 0; i < sends; i++ {
		n := per
		if i == sends-1 {
			n = total - per*(sends-1)
		}
		at := start.Add(time.Duration(i) * step)
		var batch string
		if err := e.Pool.QueryRow(e.Ctx, `
			INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, status, accepted_at, created_at, completed_at)
			VALUES (gen_random_uuid(), $1, 'campaign', 'api:campaigns_send', $2, $3, 'completed', $4::timestamptz, $4::timestamptz, $4::timestamptz + interval '1 hour')
			RETURNING id::text`, s.Company.ID, s.Camp.ID, n, at).Scan(&batch); err != nil {
			t.Fatal(err)
		}
		// By seq % 100: 2 failed (131026, 131049), 1 skipped, 5 only sent,
		// 32 delivered, 60 read; every 20th delivered one replied.
		if _, err := e.Pool.Exec(e.Ctx, `
			INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, state, lane, template_id, attempts,
				created_at, updated_at, sent_at, delivered_at, read_at, failed_at, error_code, error_title,
				billable, pricing_category, pricing_model, replied_at)
			SELECT $1::uuid, g, $2, '+1555' || lpad(g::text, 8, '0'), $3, x.state::message_state, 'campaign', $4, 1,
				$5::timestamptz, $5::timestamptz + interval '40 minutes', x.sent, x.delivered, x.read, x.failed, x.code, x.title,
				CASE WHEN x.delivered IS NOT NULL THEN true END, CASE WHEN x.delivered IS NOT NULL THEN 'marketing' END,
				CASE WHEN x.delivered IS NOT NULL THEN 'PMP' END,
				CASE WHEN x.delivered IS NOT NULL AND g % 20 = 0 THEN x.delivered + interval '10 minutes' END
			FROM generate_series(0, $6::int - 1) g, LATERAL (SELECT
				CASE WHEN g % 100 < 2 THEN 'failed' WHEN g % 100 = 2 THEN 'skipped_opt_out' WHEN g % 100 < 8 THEN 'sent'
					WHEN g % 100 < 40 THEN 'delivered' ELSE 'read' END AS state) s,
			LATERAL (SELECT s.state,
				CASE WHEN s.state <> 'skipped_opt_out' THEN $5::timestamptz + (g % 3600) * interval '1 second' END AS sent,
				CASE WHEN s.state IN ('delivered', 'read') THEN $5::timestamptz + (g % 3600 + 5) * interval '1 second' END AS delivered,
				CASE WHEN s.state = 'read' THEN $5::timestamptz + (g % 7200 + 60) * interval '1 second' END AS read,
				CASE WHEN s.state = 'failed' THEN $5::timestamptz + (g % 3600 + 3) * interval '1 second' END AS failed,
				CASE WHEN s.state = 'failed' THEN CASE WHEN g % 2 = 0 THEN 131026 ELSE 131049 END END AS code,
				CASE WHEN s.state = 'failed' THEN CASE WHEN g % 2 = 0 THEN 'Message undeliverable'
					ELSE 'This message was not delivered to maintain healthy ecosystem engagement.' END END AS title) x`,
			batch, s.Company.ID, s.Acct.ID, s.Tpl.ID, at, n); err != nil {
			t.Fatal(err)
		}
		if (i+1)%20 == 0 {
			t.Logf("%d of %d sends written", i+1, sends)
		}
	}
	if _, err := e.Pool.Exec(e.Ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, u, key string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("service-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s %v", u, resp.StatusCode, b, err)
	}
	return b
}
