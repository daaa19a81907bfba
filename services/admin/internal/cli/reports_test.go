package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/record"
)

// seedReports gives the batches fixture's messages the times, pricing and
// reply the dispatchers and callbacks would have recorded, and computes
// both companies' report counters from them (record.RebuildReports).
func (s *stack) seedReports(f batchesFixture) {
	s.t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE messages SET delivered_at = sent_at + interval '1 second' WHERE state IN ('delivered', 'read')`,
		`UPDATE messages SET read_at = sent_at + interval '2 seconds' WHERE state = 'read'`,
		`UPDATE messages SET failed_at = created_at + interval '1 second' WHERE state = 'failed'`,
		`UPDATE messages SET billable = true, pricing_category = 'marketing', pricing_model = 'PMP' WHERE delivered_at IS NOT NULL`,
		`UPDATE messages SET replied_at = read_at + interval '1 minute' WHERE state = 'read'`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			s.t.Fatal(err)
		}
	}
	for _, id := range []int64{f.acme, f.globex} {
		if _, err := record.RebuildReports(ctx, s.pool, id); err != nil {
			s.t.Fatal(err)
		}
	}
}

func TestReports(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()
	s.seedReports(f)
	ctx := context.Background()
	campaign := fmt.Sprint(f.campaign)
	from, to := "2025-06-01T00:00:00Z", "2025-06-04T00:00:00Z"
	direct := func(kind string, id int64, interval string, loc *time.Location) record.SubjectReport {
		t.Helper()
		rep, err := record.ReadSubjectReport(ctx, s.pool, record.ReportQuery{CompanyID: f.acme, SubjectKind: kind, SubjectID: id,
			From: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2025, 6, 4, 0, 0, 0, 0, time.UTC), Interval: interval, Location: loc})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// sameJSON holds --json to the record's report as the API marshals it.
	sameJSON := func(stdout string, want record.SubjectReport) {
		t.Helper()
		var decoded record.SubjectReport
		decodeJSON(t, stdout, &decoded)
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got, exp any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &exp); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("--json printed\n%s\nthe API's JSON is\n%s", stdout, raw)
		}
	}

	t.Run("table", func(t *testing.T) {
		r := s.ok("reports", "campaign", campaign, "--company", "acme", "--from", from, "--to", to)
		for _, want := range []string{
			`campaign:    "Spring sale" (id ` + campaign + `)`, "template:    t1 (", "number:", "range:       2025-06-01 00:00Z to 2025-06-04 00:00Z, by day (UTC)",
			"waiting now: 0",
			"DAY         ACCEPTED  SENT  DELIVERED  READ  REPLIED  FAILED  SKIPPED_OPT_OUT  CANCELLED  BILLABLE",
			"2025-06-01  0         0     0          0     0        0       0                0          0",
			"2025-06-02  3         2     2          1     1        1       0                0          2",
			"2025-06-03  0         0     0          0     0        0       0                0          0",
			"TOTAL       3         2     2          1     1        1       0                0          2",
			"delivered / sent:    100.00%", "read / delivered:    50.00%", "replied / delivered: 50.00%",
			"131026  Message undeliverable  1", "marketing         2",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("the report lacks %q:\n%s", want, r.stdout)
			}
		}
		r = s.ok("reports", "automation", fmt.Sprint(f.automation), "--company", "acme", "--from", "2025-06-02", "--to", "2025-06-03",
			"--interval", "hour")
		for _, want := range []string{`automation:  "Order shipped"`, "waiting now: 2", "HOUR", "2025-06-02 09:00Z  3         1     0",
			"2025-06-02 23:00Z",
			"no failures", "no billable messages", "read / delivered:    -"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("the automation's report lacks %q:\n%s", want, r.stdout)
			}
		}
		if n := strings.Count(r.stdout, "\n2025-06-02 "); n != 24 {
			t.Errorf("%d hours listed, want 24:\n%s", n, r.stdout)
		}
	})

	t.Run("json", func(t *testing.T) {
		r := s.ok("reports", "campaign", campaign, "--company", "acme", "--from", from, "--to", to, "--json")
		sameJSON(r.stdout, direct(record.SubjectCampaign, f.campaign, record.IntervalDay, time.UTC))
		madrid, err := time.LoadLocation("Europe/Madrid")
		if err != nil {
			t.Fatal(err)
		}
		r = s.ok("reports", "automation", fmt.Sprint(f.automation), "--company", "acme", "--from", from, "--to", to, "--interval", "hour",
			"--tz", "Europe/Madrid", "--json")
		want := direct(record.SubjectAutomation, f.automation, record.IntervalHour, madrid)
		sameJSON(r.stdout, want)
		if !strings.Contains(r.stdout, `"tz": "Europe/Madrid"`) || !strings.Contains(r.stdout, `"start": "2025-06-01T02:00:00+02:00"`) {
			t.Errorf("the series is not in Madrid's time:\n%.600s", r.stdout)
		}
		// A date is midnight where days begin.
		r = s.ok("reports", "campaign", campaign, "--company", "acme", "--from", "2025-06-01", "--to", "2025-06-02", "--tz", "Europe/Madrid", "--json")
		var rep record.SubjectReport
		decodeJSON(t, r.stdout, &rep)
		if got := rep.From.Format(time.RFC3339); got != "2025-06-01T00:00:00+02:00" || len(rep.Series) != 1 {
			t.Errorf("a date in Madrid starts at %s, with %d days", got, len(rep.Series))
		}
		// Without a range: the 30 days to now.
		r = s.ok("reports", "campaign", campaign, "--company", "acme", "--json")
		decodeJSON(t, r.stdout, &rep)
		if d := rep.To.Sub(rep.From); d != 30*24*time.Hour || time.Since(rep.To) > time.Minute || len(rep.Series) != 31 {
			t.Errorf("the default range is %v to %v (%d days)", rep.From, rep.To, len(rep.Series))
		}
	})

	t.Run("refused", func(t *testing.T) {
		s.fails(ExitFailure, fmt.Sprintf(`campaign %d not found in company "globex"`, f.campaign), "reports", "campaign", campaign, "--company", "globex")
		s.fails(ExitFailure, `automation 999999 not found in company "acme"`, "reports", "automation", "999999", "--company", "acme")
		s.fails(ExitUsage, `campaign id "abc": want a positive number`, "reports", "campaign", "abc", "--company", "acme")
		s.fails(ExitUsage, `--interval "week": want day or hour`, "reports", "campaign", campaign, "--company", "acme", "--interval", "week")
		s.fails(ExitUsage, `--tz "Mars/Olympus": want an IANA time zone`, "reports", "campaign", campaign, "--company", "acme", "--tz", "Mars/Olympus")
		s.fails(ExitUsage, "--from must be before --to", "reports", "campaign", campaign, "--company", "acme", "--from", to, "--to", from)
		s.fails(ExitUsage, "the range holds more than 744 hours", "reports", "campaign", campaign, "--company", "acme", "--interval", "hour",
			"--from", "2025-01-01", "--to", "2025-03-01")
		s.fails(ExitUsage, `--from "June": want an RFC 3339 time`, "reports", "campaign", campaign, "--company", "acme", "--from", "June")
		s.fails(ExitUsage, "takes one campaign id", "reports", "campaign", "--company", "acme")
	})
}

// TestReportsRebuild: counters that drifted are recomputed from the
// messages, and the report is what it was.
func TestReportsRebuild(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()
	s.seedReports(f)
	ctx := context.Background()
	q := record.ReportQuery{CompanyID: f.acme, SubjectKind: record.SubjectCampaign, SubjectID: f.campaign,
		From: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2025, 6, 4, 0, 0, 0, 0, time.UTC), Interval: record.IntervalDay}
	before, err := record.ReadSubjectReport(ctx, s.pool, q)
	if err != nil || before.Accepted == 0 {
		t.Fatalf("report before: %+v, %v", before.Counts, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE report_hours SET n = n + 1000 WHERE company_id = $1`, f.acme); err != nil {
		t.Fatal(err)
	}
	r := s.run("", "reports", "rebuild", "--company", "acme")
	if r.code != 0 || !strings.Contains(r.stdout, "rebuilt the report counters of acme") {
		t.Fatalf("rebuild: %d %s %s", r.code, r.stdout, r.stderr)
	}
	after, err := record.ReadSubjectReport(ctx, s.pool, q)
	if err != nil || after.Counts != before.Counts {
		t.Fatalf("report after the rebuild %+v (%v), want %+v", after.Counts, err, before.Counts)
	}
	if r := s.run("", "reports", "rebuild", "--company", "nobody"); r.code == 0 {
		t.Fatalf("rebuild of an unknown company: %d %s", r.code, r.stdout)
	}
}
