package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/record"
)

// Exports opens CSV exports of a company's messages.
type Exports interface {
	// OpenExport is record.OpenExport on the gateway's record and stream.
	OpenExport(ctx context.Context, q record.ExportQuery) (MessageExport, error)
}

// MessageExport is an export OpenExport checked (a *record.Export).
type MessageExport interface {
	Filename() string
	Each(ctx context.Context, fn func(*record.ExportRow) error) (int64, error)
}

const msgExportsBusy = "Too many exports are running: retry in a few seconds"

// batchExport serves GET /api/batches/{batch_id}/export.
func (h *handlers) batchExport(c *gin.Context) {
	h.export(c, record.ExportQuery{Scope: record.ExportBatch, BatchID: c.Param("batch_id")}, msgBatchNotFound)
}

// campaignExport serves GET /api/campaigns/{campaign_id}/export.
func (h *handlers) campaignExport(c *gin.Context) {
	h.subjectExport(c, record.ExportCampaign, "campaign_id", msgCampaignNotFound)
}

// automationExport serves GET /api/automations/{automation_id}/export.
func (h *handlers) automationExport(c *gin.Context) {
	h.subjectExport(c, record.ExportAutomation, "automation_id", msgAutomationNotFound)
}

// messagesExport serves GET /api/exports/messages.
func (h *handlers) messagesExport(c *gin.Context) {
	q, ok := exportRange(c, record.ExportAll)
	if ok {
		h.export(c, q, msgNotFound)
	}
}

func (h *handlers) subjectExport(c *gin.Context, scope record.ExportScope, param, notFound string) {
	q, ok := exportRange(c, scope)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(c.Param(param), 10, 64)
	if err != nil || id < 1 {
		abortDetail(c, http.StatusNotFound, notFound)
		return
	}
	q.SubjectID = id
	h.export(c, q, notFound)
}

// exportRange reads from and to (RFC 3339; to defaults to now, from to 30
// days before to); false when it answered 422.
func exportRange(c *gin.Context, scope record.ExportScope) (record.ExportQuery, bool) {
	q := query{c: c}
	from, to := q.time("from"), q.time("to")
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return record.ExportQuery{}, false
	}
	rq := record.ExportQuery{Scope: scope}
	rq.From, rq.To = record.ExportRange(from, to, time.Now())
	return rq, true
}

// export answers a CSV of the export q of the caller's company: 422 for a
// range it refuses, 404 (notFound) for what the company does not have,
// 503 when every export slot is taken, all before the first byte. Then it
// streams the rows as they are read (csvexport.Response: flushed every
// second, past the server's write timeout); an error after the first byte
// cuts the connection (http.ErrAbortHandler), so that the client sees a
// failed download, never a short file that looks whole.
func (h *handlers) export(c *gin.Context, q record.ExportQuery, notFound string) {
	q.CompanyID = principal(c).CompanyID
	if q.Scope == record.ExportBatch {
		c.Set(ctxBatchID, q.BatchID)
	}
	e, err := h.exports.OpenExport(c.Request.Context(), q)
	var inv *record.InvalidError
	switch {
	case errors.As(err, &inv):
		abortProblems(c, []problem{{Type: "value_error", Loc: []any{"query", inv.Field}, Msg: "Value error, " + inv.Msg,
			Input: c.Query(inv.Field)}})
		return
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, notFound)
		return
	case err != nil:
		h.log.Error("open an export", zap.String("scope", string(q.Scope)), zap.Error(err))
		abortUnavailable(c)
		return
	}
	select {
	case h.exportSlots <- struct{}{}:
		defer func() { <-h.exportSlots }()
	default:
		c.Header("Retry-After", "10")
		abortDetail(c, http.StatusServiceUnavailable, msgExportsBusy)
		return
	}
	start := time.Now()
	resp := csvexport.NewResponse(c.Writer, e.Filename(), record.ExportColumns, csvexport.Options{})
	var cells []string
	n, err := e.Each(c.Request.Context(), func(r *record.ExportRow) error {
		cells = r.Cells(cells)
		return resp.Write(cells)
	})
	if err == nil {
		err = resp.Close()
	}
	fields := []zap.Field{zap.String("scope", string(q.Scope)), zap.Int64("company_id", q.CompanyID),
		zap.Int64("rows", n), zap.Duration("took", time.Since(start))}
	switch {
	case err == nil:
		h.log.Info("export", fields...)
	case !resp.Started():
		h.log.Error("export failed before its first byte", append(fields, zap.Error(err))...)
		abortUnavailable(c)
	case c.Request.Context().Err() != nil:
		h.log.Info("export abandoned by the client", append(fields, zap.Error(err))...)
		panic(http.ErrAbortHandler)
	default:
		// The status and some rows are out: only a cut connection can
		// still tell the client that the file is not whole.
		h.log.Error("export failed after its first bytes; connection cut", append(fields, zap.Error(err))...)
		panic(http.ErrAbortHandler)
	}
}
