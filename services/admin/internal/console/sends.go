package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/admin/internal/batches"
)

const (
	// sendsPerPage is how many batches the Sends page lists at a time.
	sendsPerPage = 25
	// problemsPerPage is how many failed and skipped messages a batch page lists at a time.
	problemsPerPage = 50
	// timelinePoints is how many intervals the states-over-time chart has.
	timelinePoints = 60
)

// sendsView is the Sends page.
type sendsView struct {
	Batches   []batches.Batch
	CanCancel bool
	// Older is the query string of the next page, "" on the last.
	Older string
}

// batchView is one batch's page.
type batchView struct {
	Batch     batches.Batch
	Bar       template.HTML
	Chart     template.HTML
	States    []stateCount
	Held      []record.HeldCount
	Problems  []record.Message
	More      string
	CanCancel bool
}

type stateCount struct {
	State, Label, Color string
	Count               int
}

func (c *Console) sendsPage(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	before := r.URL.Query().Get("before")
	recent, more, err := c.Sends.Recent(r.Context(), u.CompanyID, before, sendsPerPage)
	if errors.Is(err, batches.ErrNotFound) {
		c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the Sends page again.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := sendsView{Batches: recent, CanCancel: u.IsAdmin()}
	if more {
		v.Older = "?before=" + recent[len(recent)-1].ID
	}
	c.renderPage(w, r, http.StatusOK, c.pages.sends, "Sends", "sends", v)
}

// loadBatch finds the company's batch named in the path, or answers 404.
func (c *Console) loadBatch(w http.ResponseWriter, r *http.Request) (batches.Batch, bool) {
	u := currentUser(r.Context())
	b, err := c.Sends.Get(r.Context(), u.CompanyID, r.PathValue("batchID"))
	if errors.Is(err, batches.ErrNotFound) {
		c.renderError(w, r, http.StatusNotFound, "Send not found", "Your company has no send with this id.")
		return b, false
	}
	if err != nil {
		c.serverError(w, r, err)
		return b, false
	}
	return b, true
}

func (c *Console) batchPage(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	b, ok := c.loadBatch(w, r)
	if !ok {
		return
	}
	tl, err := c.Sends.Timeline(r.Context(), b, timelinePoints)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	problems, err := c.Sends.Problems(r.Context(), u.CompanyID, b.ID, r.URL.Query().Get("cursor"), problemsPerPage)
	var invalid *record.InvalidError
	if errors.As(err, &invalid) {
		c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the send again.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := batchView{Batch: b, Bar: progressBar(b), Chart: timelineChart(tl), Problems: problems.Messages, CanCancel: u.IsAdmin()}
	for _, st := range batches.States {
		if n := b.Counts[st]; n > 0 {
			s := styleOf(st)
			v.States = append(v.States, stateCount{State: st, Label: s.Label, Color: s.Color, Count: n})
		}
	}
	if b.Counts[string(record.StateHeld)] > 0 {
		if v.Held, err = c.Sends.Held(r.Context(), b.ID); err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	if problems.NextCursor != nil {
		v.More = "?cursor=" + url.QueryEscape(*problems.NextCursor) + "#problems"
	}
	c.renderPage(w, r, http.StatusOK, c.pages.batch, "Send "+b.ID, "sends", v)
}

func (c *Console) cancelConfirmPage(w http.ResponseWriter, r *http.Request) {
	b, ok := c.loadBatch(w, r)
	if !ok {
		return
	}
	if !b.Cancellable() {
		c.flash(r, false, "This send has nothing left to cancel: every message was already handed to WhatsApp or is finished.")
		http.Redirect(w, r, PathSends+"/"+b.ID, http.StatusSeeOther)
		return
	}
	waiting := 0
	for st, n := range b.Counts {
		if batches.Waiting(st) {
			waiting += n
		}
	}
	c.renderPage(w, r, http.StatusOK, c.pages.cancelConfirm, "Cancel send", "sends", cancelView{Batch: b, Waiting: waiting})
}

type cancelView struct {
	Batch   batches.Batch
	Waiting int
}

// cancelBatch cancels what the batch has not handed to the provider yet.
// Admins only (requireAdmin): a member's request is 403 and changes nothing.
func (c *Console) cancelBatch(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	id := r.PathValue("batchID")
	if r.PostForm.Get("confirm") != "yes" {
		// Cancelling cannot be undone: it happens only from the
		// confirmation page.
		http.Redirect(w, r, PathSends+"/"+url.PathEscape(id)+"/cancel", http.StatusSeeOther)
		return
	}
	u := currentUser(r.Context())
	res, err := c.Sends.Cancel(r.Context(), u.CompanyID, id)
	if errors.Is(err, batches.ErrNotFound) {
		c.renderError(w, r, http.StatusNotFound, "Send not found", "Your company has no send with this id.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("batch cancelled from the console", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID),
		zap.String("batch_id", res.ID), zap.Int("cancelled", res.Cancelled))
	switch res.Cancelled {
	case 0:
		c.flash(r, false, "Nothing was cancelled: every message of this send had already been handed to WhatsApp or was finished.")
	case 1:
		c.flash(r, true, "Send cancelled: 1 message will not be sent.")
	default:
		c.flash(r, true, fmt.Sprintf("Send cancelled: %d messages will not be sent.", res.Cancelled))
	}
	http.Redirect(w, r, PathSends+"/"+res.ID, http.StatusSeeOther)
}
