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

const (
	msgExportsBusy = "Too many exports are running: retry in a few seconds"
	// exportFlushEvery is how often a download is flushed to the client
	// (and its write deadline moved on): rows reach it as they are read,
	// and a client that stops reading is cut off after exportWriteTimeout.
	exportFlushEvery   = time.Second
	exportWriteTimeout = 30 * time.Second
	csvContentType     = "text/csv; charset=utf-8"
)

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
// streams the rows as they are read; an error after the first byte cuts
// the connection (http.ErrAbortHandler), so that the client sees a failed
// download, never a short file that looks whole.
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
	s := newCSVStream(c, e.Filename())
	n, err := e.Each(c.Request.Context(), s.row)
	if err == nil {
		err = s.flush()
	}
	fields := []zap.Field{zap.String("scope", string(q.Scope)), zap.Int64("company_id", q.CompanyID),
		zap.Int64("rows", n), zap.Duration("took", time.Since(start))}
	if err != nil {
		// The status line and some rows are out: only a cut connection
		// can still tell the client that the file is not whole.
		if c.Request.Context().Err() != nil {
			h.log.Info("export abandoned by the client", append(fields, zap.Error(err))...)
		} else {
			h.log.Error("export failed after its first bytes; connection cut", append(fields, zap.Error(err))...)
		}
		panic(http.ErrAbortHandler)
	}
	h.log.Info("export", fields...)
}

// csvStream writes an export to the response: the headers and the header
// row when it starts, then rows through a buffer flushed at least every
// exportFlushEvery.
type csvStream struct {
	c        *gin.Context
	filename string
	rc       *http.ResponseController
	w        *csvexport.Writer
	cells    []string
	started  bool
	last     time.Time
}

func newCSVStream(c *gin.Context, filename string) *csvStream {
	return &csvStream{c: c, filename: filename, rc: http.NewResponseController(c.Writer),
		w: csvexport.NewWriter(c.Writer, csvexport.Options{})}
}

// start sends the status, the headers and the CSV's header row. A
// download outlives the server's write timeout (30 s, meant for the API's
// small answers): the write deadline moves on as rows go out (extend).
// The read timeout does not matter: net/http lifts the read deadline once
// a request without a body is read.
func (s *csvStream) start() error {
	s.started = true
	h := s.c.Writer.Header()
	h["Content-Type"] = []string{csvContentType}
	h["Content-Disposition"] = []string{`attachment; filename="` + s.filename + `"`}
	s.c.Writer.WriteHeader(http.StatusOK)
	if err := s.w.Write(record.ExportColumns); err != nil {
		return err
	}
	return s.flush()
}

// row writes one row, flushing when the last flush is exportFlushEvery
// old. The write deadline is moved on before anything is written.
func (s *csvStream) row(r *record.ExportRow) error {
	if !s.started {
		if err := s.start(); err != nil {
			return err
		}
	}
	due := time.Since(s.last) >= exportFlushEvery
	if due {
		if err := s.extend(); err != nil {
			return err
		}
	}
	s.cells = r.Cells(s.cells)
	if err := s.w.Write(s.cells); err != nil {
		return err
	}
	if due {
		return s.flush()
	}
	return nil
}

func (s *csvStream) extend() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// flush sends what is buffered (starting the answer if no row came).
func (s *csvStream) flush() error {
	if !s.started {
		return s.start()
	}
	if err := s.extend(); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	s.last = time.Now()
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
