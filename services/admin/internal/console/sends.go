package console

import (
	"errors"
	"html/template"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley/services/admin/internal/sends"
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
	Batches   []sends.Batch
	CanCancel bool
	// Older is the query string of the next page, "" on the last.
	Older string
}

// batchView is one batch's page.
type batchView struct {
	Batch     sends.Batch
	Bar       template.HTML
	Chart     template.HTML
	States    []stateCount
	Problems  []sends.Problem
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
	batches, more, err := c.Sends.Recent(r.Context(), u.CompanyID, before, sendsPerPage)
	if errors.Is(err, sends.ErrNotFound) {
		c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the Sends page again.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	co, err := c.Credentials.Company(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := sendsView{Batches: batches, CanCancel: u.IsAdmin()}
	if more {
		v.Older = "?before=" + batches[len(batches)-1].ID
	}
	c.render(w, r, http.StatusOK, c.pages.sends, view{Title: "Sends", Nav: "sends", User: &u, Company: co, Page: v})
}

// loadBatch finds the company's batch named in the path, or answers 404.
func (c *Console) loadBatch(w http.ResponseWriter, r *http.Request) (sends.Batch, bool) {
	u := currentUser(r.Context())
	b, err := c.Sends.Get(r.Context(), u.CompanyID, r.PathValue("batchID"))
	if errors.Is(err, sends.ErrNotFound) {
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
	after := -1
	if s := r.URL.Query().Get("after"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the send again.")
			return
		}
		after = n
	}
	tl, err := c.Sends.Timeline(r.Context(), b, timelinePoints)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	problems, next, err := c.Sends.Problems(r.Context(), b, after, problemsPerPage)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	co, err := c.Credentials.Company(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := batchView{Batch: b, Bar: progressBar(b), Chart: timelineChart(tl), Problems: problems, CanCancel: u.IsAdmin()}
	for _, st := range sends.States {
		if n := b.Counts[st]; n > 0 {
			s := styleOf(st)
			v.States = append(v.States, stateCount{State: st, Label: s.Label, Color: s.Color, Count: n})
		}
	}
	if next >= 0 {
		v.More = "?after=" + strconv.Itoa(next) + "#problems"
	}
	c.render(w, r, http.StatusOK, c.pages.batch, view{Title: "Send " + b.ID, Nav: "sends", User: &u, Company: co, Page: v})
}
