package console

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/record"
)

func TestReportRange(t *testing.T) {
	now := time.Date(2025, 6, 2, 9, 30, 0, 0, time.UTC)
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	ok := []struct {
		query        string
		form         rangeForm
		from, to     time.Time
		wantInterval string
	}{
		{"", rangeForm{"2025-05-04", "2025-06-02", "day"}, day(2025, 5, 4), day(2025, 6, 3), "day"},
		{"interval=hour", rangeForm{"2025-06-01", "2025-06-02", "hour"}, day(2025, 6, 1), day(2025, 6, 3), "hour"},
		{"from=2025-06-01&to=2025-06-01&interval=hour", rangeForm{"2025-06-01", "2025-06-01", "hour"}, day(2025, 6, 1), day(2025, 6, 2), "hour"},
		{"to=2025-03-31", rangeForm{"2025-03-02", "2025-03-31", "day"}, day(2025, 3, 2), day(2025, 4, 1), "day"},
		{"from=2025-05-01&to=2025-05-31&interval=hour", rangeForm{"2025-05-01", "2025-05-31", "hour"}, day(2025, 5, 1), day(2025, 6, 1), "hour"},
	}
	for _, c := range ok {
		q, _ := url.ParseQuery(c.query)
		form, rq, problem := reportRange(q, now)
		if problem != "" || form != c.form || !rq.From.Equal(c.from) || !rq.To.Equal(c.to) || rq.Interval != c.wantInterval || rq.Location != time.UTC {
			t.Errorf("%q: %+v %v..%v %s %q", c.query, form, rq.From, rq.To, rq.Interval, problem)
		}
	}
	for query, want := range map[string]string{
		"from=2025-06-03&to=2025-06-02":               "The start date is after the end date",
		"from=2025-05-01&to=2025-06-01&interval=hour": "By hour, a report covers at most 31 days",
		"from=2020-01-01&to=2025-06-01":               "A report covers at most 744 days",
		"from=1%2F6%2F2025":                           `The start date "1/6/2025" is not a date`,
		"to=2025-02-30":                               `The end date "2025-02-30" is not a date`,
		"interval=minute":                             "Show the report by day or by hour.",
	} {
		q, _ := url.ParseQuery(query)
		form, _, problem := reportRange(q, now)
		if !strings.HasPrefix(problem, want) {
			t.Errorf("%q: problem %q, want %q", query, problem, want)
		}
		if form.From != q.Get("from") && q.Get("from") != "" {
			t.Errorf("%q: the form lost what was typed: %+v", query, form)
		}
	}
	if _, _, p := reportRange(url.Values{"from": {"2025-05-02"}, "to": {"2025-06-02"}, "interval": {record.IntervalHour}}, now); p == "" {
		t.Error("32 days by hour are accepted")
	}
}

func TestFormatCountAndRate(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
	r := 0.1667
	if got := formatRate(&r); got != "16.7%" {
		t.Errorf("formatRate(0.1667) = %q", got)
	}
	if got := formatRate(nil); got != "–" {
		t.Errorf("formatRate(nil) = %q", got)
	}
}
