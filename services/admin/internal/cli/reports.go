package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/record"
)

func reportsCmd(e *env) *cobra.Command {
	return group("reports", "Read what a campaign's or an automation's messages did over a range, by day or by hour",
		reportCmd(e, record.SubjectCampaign), reportCmd(e, record.SubjectAutomation), rebuildReportsCmd(e))
}

// rebuildReportsCmd recomputes a company's report counters from its messages.
func rebuildReportsCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:   "rebuild",
		Short: "Recompute a company's report counters from its messages",
		Long: strings.TrimSpace(`
Replaces the company's report counters (report_hours, and the deltas not
folded yet) with those computed from its messages (record.RebuildReports), in
one transaction: for counters found wrong, or messages changed by hand. It
reads every message of the company (minutes for tens of millions). Changes
committed while it runs may count twice: run it while the company sends
nothing.`),
		Example: `  parleyctl reports rebuild --company acme`,
		Args:    exactArgs(0, "no arguments"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		pool, co, err := e.companyDB(ctx, company)
		if err != nil {
			return err
		}
		start := time.Now()
		n, err := record.RebuildReports(ctx, pool, co.ID)
		if err != nil {
			return err
		}
		took := time.Since(start).Round(time.Millisecond)
		return e.emit(map[string]any{"company": co.Slug, "counter_rows": n, "seconds": took.Seconds()}, func(w io.Writer) {
			fmt.Fprintf(w, "rebuilt the report counters of %s from its messages: %d counter rows in %s\n", co.Slug, n, took)
		})
	})
	companyFlag(c, &company)
	return c
}

func reportCmd(e *env, kind string) *cobra.Command {
	var company, from, to, interval, tz string
	c := &cobra.Command{
		Use:   kind + " <" + kind + "_id>",
		Short: fmt.Sprintf("Show a %s's report: its messages by day or hour, the totals, rates, failures and billing", kind),
		Long: strings.TrimSpace(fmt.Sprintf(`
Reads the %[1]s's report as GET /api/%[1]ss/{id}/report answers it, from the
report counters (nothing counts messages): accepted, sent, delivered, read,
replied, failed, skipped for opt-out, cancelled and billable messages in each
step of the range, the totals and rates (delivered / sent, read / delivered,
replied / delivered), the failures by error code and the billable messages by
pricing category, and how many messages wait to be sent now.

--from and --to take an RFC 3339 time, a date (midnight in --tz) or a
duration ago (24h); --to defaults to now and --from to 30 days before it by
day, 24 hours by hour. --tz is the IANA zone days begin in (UTC). With --json
it prints the API's JSON.`, kind)),
		Example: fmt.Sprintf(`  parleyctl reports %[1]s 3 --company acme
  parleyctl reports %[1]s 3 --company acme --from 2026-11-01 --to 2026-12-01 --tz Europe/Madrid
  parleyctl reports %[1]s 3 --company acme --interval hour --from 48h --json`, kind),
		Args: exactArgs(1, "one "+kind+" id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := strconv.ParseInt(strings.TrimSpace(args[0]), 10, 64)
		if err != nil || id < 1 {
			return usagef("%s id %q: want a positive number", kind, args[0])
		}
		q, err := reportQuery(from, to, interval, tz, time.Now())
		if err != nil {
			return err
		}
		pool, co, err := e.companyDB(ctx, company)
		if err != nil {
			return err
		}
		q.CompanyID, q.SubjectKind, q.SubjectID = co.ID, kind, id
		rep, err := record.ReadSubjectReport(ctx, pool, q)
		if errors.Is(err, record.ErrNotFound) {
			return fmt.Errorf("%s %d not found in company %q", kind, id, co.Slug)
		}
		if err != nil {
			return err
		}
		return e.emit(rep, func(w io.Writer) { printReport(w, kind, rep) })
	})
	companyFlag(c, &company)
	fl := c.Flags()
	fl.StringVar(&from, "from", "", "start of the range: RFC 3339, a date, or a duration ago (default: 30 days, or 24 hours, before --to)")
	fl.StringVar(&to, "to", "", "end of the range, excluded: RFC 3339, a date, or a duration ago (default: now)")
	fl.StringVar(&interval, "interval", record.IntervalDay, "step of the series: day or hour")
	fl.StringVar(&tz, "tz", "UTC", "IANA time zone where days begin, as Europe/Madrid")
	return c
}

// reportQuery reads the range flags as the API reads its query; a range
// record.ReportBuckets refuses is a usage mistake that says why.
func reportQuery(from, to, interval, tz string, now time.Time) (record.ReportQuery, error) {
	if interval != record.IntervalDay && interval != record.IntervalHour {
		return record.ReportQuery{}, usagef("--interval %q: want day or hour", interval)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" || tz == "Local" {
		return record.ReportQuery{}, usagef("--tz %q: want an IANA time zone, as Europe/Madrid", tz)
	}
	q := record.ReportQuery{Interval: interval, Location: loc, To: now}
	if to != "" {
		if q.To, err = reportTime("to", to, now, loc); err != nil {
			return q, err
		}
	}
	q.From = q.To.Add(-record.DefaultReportSpan[interval])
	if from != "" {
		if q.From, err = reportTime("from", from, now, loc); err != nil {
			return q, err
		}
	}
	if _, err := record.ReportBuckets(q.From, q.To, interval, loc); err != nil {
		if !q.From.Before(q.To) {
			return q, usagef("--from must be before --to")
		}
		if interval == record.IntervalHour {
			return q, usagef("the range holds more than %d hours: narrow it, or use --interval day", record.MaxReportPoints)
		}
		return q, usagef("the range holds more than %d days: narrow it", record.MaxReportPoints)
	}
	return q, nil
}

// reportTime is a range flag: a date (midnight in loc), else what
// parseTimeFlag reads.
func reportTime(flag, v string, now time.Time, loc *time.Location) (time.Time, error) {
	if t, err := time.ParseInLocation("2006-01-02", v, loc); err == nil {
		return t, nil
	}
	t, err := parseTimeFlag(flag, v, now)
	if err != nil {
		return t, usagef("--%s %q: want an RFC 3339 time (2026-11-24T10:00:00Z), a date (2026-11-24) or a duration ago (24h)", flag, v)
	}
	return t, nil
}

// printReport writes a report as a person reads it: what it is of, the
// series with its totals, the rates, the failures and the billing.
func printReport(w io.Writer, kind string, rep record.SubjectReport) {
	s := rep.Campaign
	if s == nil {
		s = rep.Automation
	}
	template, number := "-", "-"
	if s.Template != nil {
		template = fmt.Sprintf("%s (%s)", s.Template.Name, s.Template.Language)
	}
	if s.MessagingAccount != nil {
		number = fmt.Sprintf("%s (id %d)", s.MessagingAccount.Name, s.MessagingAccount.ID)
	}
	stepLayout := "2006-01-02"
	if rep.Interval == record.IntervalHour {
		stepLayout = "2006-01-02 15:04Z07:00"
	}
	fields(w, kind, fmt.Sprintf("%q (id %d)", s.Name, s.ID), "template", template, "number", number,
		"range", fmt.Sprintf("%s to %s, by %s (%s)", rep.From.Format("2006-01-02 15:04Z07:00"), rep.To.Format("2006-01-02 15:04Z07:00"),
			rep.Interval, rep.TZ),
		"waiting now", strconv.FormatInt(rep.Waiting, 10))
	fmt.Fprintln(w)
	row := func(first string, c record.Counts) []string {
		out := []string{first}
		for _, n := range []int64{c.Accepted, c.Sent, c.Delivered, c.Read, c.Replied, c.Failed, c.SkippedOptOut, c.Cancelled, c.Billable} {
			out = append(out, strconv.FormatInt(n, 10))
		}
		return out
	}
	rows := make([][]string, 0, len(rep.Series)+1)
	for _, p := range rep.Series {
		rows = append(rows, row(p.Start.Format(stepLayout), p.Counts))
	}
	rows = append(rows, row("TOTAL", rep.Counts))
	table(w, "", []string{strings.ToUpper(rep.Interval), "ACCEPTED", "SENT", "DELIVERED", "READ", "REPLIED", "FAILED", "SKIPPED_OPT_OUT",
		"CANCELLED", "BILLABLE"}, rows)
	fmt.Fprintln(w)
	fields(w, "delivered / sent", pct(rep.Rates.Delivered), "read / delivered", pct(rep.Rates.Read),
		"replied / delivered", pct(rep.Rates.Replied))
	fmt.Fprintln(w)
	failures := make([][]string, len(rep.Failures))
	for i, f := range rep.Failures {
		failures[i] = []string{strconv.Itoa(f.Code), orDash(f.Title), strconv.FormatInt(f.Count, 10)}
	}
	table(w, "no failures", []string{"ERROR", "TITLE", "FAILED"}, failures)
	fmt.Fprintln(w)
	billing := make([][]string, len(rep.Billing))
	for i, b := range rep.Billing {
		billing[i] = []string{orDash(b.Category), strconv.FormatInt(b.Count, 10)}
	}
	table(w, "no billable messages", []string{"PRICING_CATEGORY", "BILLABLE"}, billing)
}

// pct writes a rate as a percentage, "-" when it has no denominator.
func pct(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r*100, 'f', 2, 64) + "%"
}
