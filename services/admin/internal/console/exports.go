package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/record"
)

// The console's CSV downloads: a send's messages (linked from its page),
// and a campaign's or an automation's over a range (linked from their
// report pages). Every signed-in user of the company may download them, as
// every user sees the Sends pages.
const (
	exportCampaignPath   = "/campaigns/{id}/export.csv"
	exportAutomationPath = "/automations/{id}/export.csv"
	// maxDownloads bounds the downloads running at once: each holds a
	// database connection until it ends.
	maxDownloads = 2
)

func (c *Console) routeExports(mux *http.ServeMux) {
	c.downloads = make(chan struct{}, maxDownloads)
	mux.Handle("GET "+PathSends+"/{batchID}/export.csv", c.requireUser(c.exportBatch))
	mux.Handle("GET "+exportCampaignPath, c.requireUser(c.exportSubject(record.ExportCampaign, "Campaign not found",
		"Your company has no campaign with this id.")))
	mux.Handle("GET "+exportAutomationPath, c.requireUser(c.exportSubject(record.ExportAutomation, "Automation not found",
		"Your company has no automation with this id.")))
}

// ExportLink is the path of the CSV download of a campaign's (scope
// record.ExportCampaign) or an automation's messages over [from, to), for
// a report page to link to.
func ExportLink(scope record.ExportScope, id int64, from, to time.Time) string {
	q := url.Values{"from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}}
	return fmt.Sprintf("/%ss/%d/export.csv?%s", scope, id, q.Encode())
}

func (c *Console) exportBatch(w http.ResponseWriter, r *http.Request) {
	q := record.ExportQuery{CompanyID: currentUser(r.Context()).CompanyID, Scope: record.ExportBatch, BatchID: r.PathValue("batchID")}
	c.download(w, r, q, "Send not found", "Your company has no send with this id.")
}

// exportSubject downloads a campaign's or an automation's messages. Query:
// from and to, each an RFC 3339 time or a date (its midnight, UTC); to is
// excluded and defaults to now, from to 30 days before to.
func (c *Console) exportSubject(scope record.ExportScope, notFound, why string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 1 {
			c.renderError(w, r, http.StatusNotFound, notFound, why)
			return
		}
		var bounds [2]*time.Time
		for i, name := range []string{"from", "to"} {
			v := r.URL.Query().Get(name)
			if v == "" {
				continue
			}
			t, err := parseDay(v)
			if err != nil {
				c.renderError(w, r, http.StatusBadRequest, "Invalid range",
					fmt.Sprintf("%q is not a time for %s: give a date (2026-11-28) or a time (2026-11-28T09:00:00Z).", v, name))
				return
			}
			bounds[i] = &t
		}
		q := record.ExportQuery{CompanyID: currentUser(r.Context()).CompanyID, Scope: scope, SubjectID: id}
		q.From, q.To = record.ExportRange(bounds[0], bounds[1], c.now())
		c.download(w, r, q, notFound, why)
	}
}

func parseDay(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

// download streams an export as a CSV file with a byte order mark, so
// that Excel, which people open it with, reads it as UTF-8. An error
// before the first row is a page; after, the connection is cut, so that
// the browser reports a failed download rather than saving a short file.
func (c *Console) download(w http.ResponseWriter, r *http.Request, q record.ExportQuery, notFound, why string) {
	e, err := c.Sends.OpenExport(r.Context(), q)
	var inv *record.InvalidError
	switch {
	case errors.As(err, &inv):
		c.renderError(w, r, http.StatusBadRequest, "Invalid range", "The range cannot be downloaded: "+inv.Msg+".")
		return
	case errors.Is(err, record.ErrNotFound):
		c.renderError(w, r, http.StatusNotFound, notFound, why)
		return
	case err != nil:
		c.serverError(w, r, err)
		return
	}
	select {
	case c.downloads <- struct{}{}:
		defer func() { <-c.downloads }()
	default:
		w.Header().Set("Retry-After", "10")
		c.renderError(w, r, http.StatusServiceUnavailable, "Too many downloads",
			"Other downloads are running. Try again in a few seconds.")
		return
	}
	u := currentUser(r.Context())
	start := time.Now()
	resp := csvexport.NewResponse(w, e.Filename(), record.ExportColumns, csvexport.Options{BOM: true})
	var cells []string
	n, err := e.Each(r.Context(), func(row *record.ExportRow) error {
		cells = row.Cells(cells)
		return resp.Write(cells)
	})
	if err == nil {
		err = resp.Close()
	}
	fields := []zap.Field{zap.String("scope", string(q.Scope)), zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID),
		zap.Int64("rows", n), zap.Duration("took", time.Since(start))}
	switch {
	case err == nil:
		c.Log.Info("download", fields...)
	case !resp.Started():
		c.serverError(w, r, err)
	default:
		c.Log.Warn("download cut after its first bytes", append(fields, zap.Error(err))...)
		panic(http.ErrAbortHandler)
	}
}
