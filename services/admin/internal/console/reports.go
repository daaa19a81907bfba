package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/parleyhq/parley/pkg/record"
)

// Paths of the report pages.
const (
	PathCampaigns   = "/campaigns"
	PathAutomations = "/automations"
)

const (
	// recentBatches is how many of its latest sends a report page lists.
	recentBatches = 10
	// dateLayout is how the range picker's dates are written (an HTML date input's value).
	dateLayout = "2006-01-02"
)

// subjectKind is what the report pages of campaigns, or of automations,
// need to tell them apart.
type subjectKind struct {
	// Kind is record.SubjectCampaign or record.SubjectAutomation.
	Kind string
	// Path is the list's path; a report is Path/{id}.
	Path string
	// One and Many name it in a heading: "Campaign", "Campaigns".
	One, Many string
	// Nav is the sidebar entry.
	Nav string
	// NotFound is the 404 page's message.
	NotFound string
}

var (
	campaignPages = subjectKind{Kind: record.SubjectCampaign, Path: PathCampaigns, One: "Campaign", Many: "Campaigns", Nav: "campaigns",
		NotFound: "Your company has no campaign with this id."}
	automationPages = subjectKind{Kind: record.SubjectAutomation, Path: PathAutomations, One: "Automation", Many: "Automations", Nav: "automations",
		NotFound: "Your company has no automation with this id."}
)

// routeReports adds the campaigns' and automations' pages: every signed-in
// user of the company reads them, admins and members alike.
func (c *Console) routeReports(mux *http.ServeMux) {
	for _, k := range []subjectKind{campaignPages, automationPages} {
		mux.Handle("GET "+k.Path, c.requireUser(c.subjectsPage(k)))
		mux.Handle("GET "+k.Path+"/{id}", c.requireUser(c.reportPage(k)))
	}
}

// subjectsView is the list of a company's campaigns or automations.
type subjectsView struct {
	Kind     subjectKind
	Subjects []record.SubjectTotals
}

func (c *Console) subjectsPage(k subjectKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u := currentUser(r.Context())
		list, err := c.Reports.List(r.Context(), u.CompanyID, k.Kind)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		c.renderPage(w, r, http.StatusOK, c.pages.subjects, k.Many, k.Nav, subjectsView{Kind: k, Subjects: list})
	}
}

// rangeForm is the report page's range picker as it shows: dates in UTC,
// both days included.
type rangeForm struct {
	From, To, Interval string
}

// reportView is a campaign's or automation's report page.
type reportView struct {
	Kind    subjectKind
	Subject record.ReportSubject
	Form    rangeForm
	// Problem says why the range asked for cannot be shown; the page then
	// has no figures.
	Problem string
	Report  *record.SubjectReport
	// Last is the last day of the range (From to Last, both included).
	Last    time.Time
	Figures []figure
	Chart   template.HTML
	Rows    []record.ReportPoint
	Batches []record.Batch
	// Export is the path of the CSV download of the range (ExportLink).
	Export string
}

func (c *Console) reportPage(k subjectKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u := currentUser(r.Context())
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 1 {
			c.renderError(w, r, http.StatusNotFound, k.One+" not found", k.NotFound)
			return
		}
		form, q, problem := reportRange(r.URL.Query(), c.now())
		q.CompanyID, q.SubjectKind, q.SubjectID = u.CompanyID, k.Kind, id
		v := reportView{Kind: k, Form: form, Problem: problem}
		status := http.StatusOK
		if problem == "" {
			rep, err := c.Reports.Report(r.Context(), q)
			if err != nil {
				c.subjectError(w, r, k, err)
				return
			}
			v.Report = &rep
			if rep.Campaign != nil {
				v.Subject = *rep.Campaign
			} else {
				v.Subject = *rep.Automation
			}
			v.Last = q.To.AddDate(0, 0, -1)
			v.Figures = figures(rep.Report)
			v.Chart = reportChart(rep.Series, rep.Interval)
			for _, p := range rep.Series {
				if p.Counts != (record.Counts{}) {
					v.Rows = append(v.Rows, p)
				}
			}
			v.Export = ExportLink(record.ExportScope(k.Kind), id, q.From, q.To)
		} else {
			// The page still names what it is of, with the form to fix the range.
			if v.Subject, err = c.Reports.Subject(r.Context(), u.CompanyID, k.Kind, id); err != nil {
				c.subjectError(w, r, k, err)
				return
			}
			status = http.StatusUnprocessableEntity
		}
		if v.Batches, err = c.Reports.RecentBatches(r.Context(), u.CompanyID, k.Kind, id, recentBatches); err != nil {
			c.serverError(w, r, err)
			return
		}
		c.renderPage(w, r, status, c.pages.report, v.Subject.Name, k.Nav, v)
	}
}

// subjectError answers a failed read of a subject: 404 when the company
// has no such campaign or automation, else 500.
func (c *Console) subjectError(w http.ResponseWriter, r *http.Request, k subjectKind, err error) {
	if errors.Is(err, record.ErrNotFound) {
		c.renderError(w, r, http.StatusNotFound, k.One+" not found", k.NotFound)
		return
	}
	c.serverError(w, r, err)
}

// reportRange reads the range picker's query: from and to are dates
// (YYYY-MM-DD, UTC, both days included), interval day or hour. Without
// them a report shows by day the 30 days to today, by hour yesterday and
// today. problem says, in a sentence, what is wrong with the range asked
// for ("" when nothing is); the form keeps what was typed.
func reportRange(q url.Values, now time.Time) (form rangeForm, rq record.ReportQuery, problem string) {
	form = rangeForm{From: q.Get("from"), To: q.Get("to"), Interval: q.Get("interval")}
	switch form.Interval {
	case "":
		form.Interval = record.IntervalDay
	case record.IntervalDay, record.IntervalHour:
	default:
		return form, rq, "Show the report by day or by hour."
	}
	today := now.UTC().Truncate(24 * time.Hour)
	if form.To == "" {
		form.To = today.Format(dateLayout)
	}
	last, err := time.Parse(dateLayout, form.To)
	if err != nil {
		return form, rq, fmt.Sprintf("The end date %q is not a date: write it as YYYY-MM-DD.", form.To)
	}
	if form.From == "" {
		days := 29
		if form.Interval == record.IntervalHour {
			days = 1
		}
		form.From = last.AddDate(0, 0, -days).Format(dateLayout)
	}
	first, err := time.Parse(dateLayout, form.From)
	if err != nil {
		return form, rq, fmt.Sprintf("The start date %q is not a date: write it as YYYY-MM-DD.", form.From)
	}
	if first.After(last) {
		return form, rq, "The start date is after the end date: choose a start on or before the end."
	}
	rq = record.ReportQuery{From: first, To: last.AddDate(0, 0, 1), Interval: form.Interval, Location: time.UTC}
	if _, err := record.ReportBuckets(rq.From, rq.To, rq.Interval, rq.Location); err != nil {
		if form.Interval == record.IntervalHour {
			return form, rq, fmt.Sprintf("By hour, a report covers at most %d days (%d hours): choose fewer days, or show it by day.",
				record.MaxReportPoints/24, record.MaxReportPoints)
		}
		return form, rq, fmt.Sprintf("A report covers at most %d days: choose fewer days.", record.MaxReportPoints)
	}
	return form, rq, ""
}

// figure is one of a report's totals as its page shows it.
type figure struct {
	Metric, Label string
	Value         int64
	// Rate is the figure's share of RateOf (nil when that is 0); RateOf
	// is "" for a figure without a rate.
	Rate   *float64
	RateOf string
}

// figures are a report's totals in the order a message goes.
func figures(r record.Report) []figure {
	return []figure{
		{Metric: "accepted", Label: "Accepted", Value: r.Accepted},
		{Metric: "sent", Label: "Sent", Value: r.Sent},
		{Metric: "delivered", Label: "Delivered", Value: r.Delivered, Rate: r.Rates.Delivered, RateOf: "sent"},
		{Metric: "read", Label: "Read", Value: r.Read, Rate: r.Rates.Read, RateOf: "delivered"},
		{Metric: "replied", Label: "Replied", Value: r.Replied, Rate: r.Rates.Replied, RateOf: "delivered"},
		{Metric: "failed", Label: "Failed", Value: r.Failed},
		{Metric: "skipped_opt_out", Label: "Skipped (opted out)", Value: r.SkippedOptOut},
		{Metric: "cancelled", Label: "Cancelled", Value: r.Cancelled},
		{Metric: "billable", Label: "Billable", Value: r.Billable},
	}
}
