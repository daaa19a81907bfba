package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/record"
)

// Reports reads the reports of campaigns and automations.
type Reports interface {
	// Report is record.ReadSubjectReport.
	Report(ctx context.Context, q record.ReportQuery) (record.SubjectReport, error)
}

const (
	msgCampaignNotFound   = "Campaign not found"
	msgAutomationNotFound = "Automation not found"
)

// campaignReport serves GET /api/campaigns/{campaign_id}/report.
func (h *handlers) campaignReport(c *gin.Context) {
	h.report(c, record.SubjectCampaign, "campaign_id", msgCampaignNotFound)
}

// automationReport serves GET /api/automations/{automation_id}/report.
func (h *handlers) automationReport(c *gin.Context) {
	h.report(c, record.SubjectAutomation, "automation_id", msgAutomationNotFound)
}

// report reads a subject's report. Query: from and to (RFC 3339; to
// defaults to now, from to 30 days before it by day, 24 hours by hour),
// interval (day or hour; day), tz (an IANA zone where days begin; UTC). A
// range that is empty or has more than record.MaxReportPoints steps is 422;
// an id the company has no subject for is 404.
func (h *handlers) report(c *gin.Context, kind, param, notFound string) {
	q := query{c: c}
	interval := q.enum("interval", []string{record.IntervalDay, record.IntervalHour})
	if interval == "" {
		interval = record.IntervalDay
	}
	loc := time.UTC
	if name, ok := c.GetQuery("tz"); ok {
		l, err := time.LoadLocation(name)
		if err != nil || name == "" || name == "Local" {
			q.fail("timezone", "tz", "Input should be an IANA time zone, as Europe/Madrid", name)
		} else {
			loc = l
		}
	}
	from, to := q.time("from"), q.time("to")
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	rq := record.ReportQuery{CompanyID: principal(c).CompanyID, SubjectKind: kind, Interval: interval, Location: loc,
		To: time.Now()}
	if to != nil {
		rq.To = *to
	}
	rq.From = rq.To.Add(-record.DefaultReportSpan[interval])
	if from != nil {
		rq.From = *from
	}
	if _, err := record.ReportBuckets(rq.From, rq.To, interval, loc); err != nil {
		field, msg := "from", "from must be before to"
		if !rq.From.Before(rq.To) {
			if from == nil {
				field = "to"
			}
		} else {
			field, msg = "interval", fmt.Sprintf("the range holds more than %d %ss: narrow it, or ask by day", record.MaxReportPoints, interval)
			if interval == record.IntervalDay {
				msg = fmt.Sprintf("the range holds more than %d days: narrow it", record.MaxReportPoints)
			}
		}
		abortProblems(c, []problem{{Type: "value_error", Loc: []any{"query", field}, Msg: "Value error, " + msg,
			Input: c.Query(field)}})
		return
	}
	id, err := strconv.ParseInt(c.Param(param), 10, 64)
	if err != nil || id < 1 {
		abortDetail(c, http.StatusNotFound, notFound)
		return
	}
	rq.SubjectID = id
	rep, err := h.reports.Report(c.Request.Context(), rq)
	switch {
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, notFound)
	case err != nil:
		h.log.Error("read a report", zap.String("kind", kind), zap.Int64("id", id), zap.Error(err))
		abortUnavailable(c)
	default:
		writeValue(c, http.StatusOK, rep)
	}
}
