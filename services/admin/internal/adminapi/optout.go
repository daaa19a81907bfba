package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/parleyhq/parley/pkg/contacts"
)

// The address book's routes (mounted by WithAddressBook):
//
//	GET    /admin/api/companies/{id}/opt-out-settings   200 OptOutSettings
//	PUT    /admin/api/companies/{id}/opt-out-settings   200 OptOutSettings; body: all three lists
//	DELETE /admin/api/companies/{id}/opt-out-settings   200 the defaults
//	GET    /admin/api/companies/{id}/contacts/{phone}   200 {"contact", "opted_out", "opt_out_history"}

// AddressBook is what the address book's routes use (*contacts.Store).
type AddressBook interface {
	OptOutSettings(ctx context.Context, companyID int64) (contacts.OptOutSettings, error)
	SetOptOutSettings(ctx context.Context, companyID int64, s contacts.OptOutSettings) (contacts.OptOutSettings, error)
	ResetOptOutSettings(ctx context.Context, companyID int64) (contacts.OptOutSettings, error)
	ByPhone(ctx context.Context, companyID int64, number string) (contacts.Contact, error)
	OptOutHistory(ctx context.Context, companyID, contactID int64) ([]contacts.ConsentEvent, error)
}

// CompanyExists reports whether a company id is known.
type CompanyExists func(ctx context.Context, id int64) (bool, error)

// WithAddressBook mounts the opt-out settings and contact routes.
func (a *API) WithAddressBook(book AddressBook, exists CompanyExists) *API {
	a.book, a.exists = book, exists
	a.mux.HandleFunc(Prefix+"companies/{id}/opt-out-settings",
		methods{http.MethodGet: a.getOptOut, http.MethodPut: a.putOptOut, http.MethodDelete: a.resetOptOut}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/contacts/{phone}", methods{http.MethodGet: a.getContact}.serve)
	return a
}

// company is the path's company when it exists; else it answers 404.
func (a *API) company(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, ok := a.companyID(w, r)
	if !ok {
		return 0, false
	}
	found, err := a.exists(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return 0, false
	}
	if !found {
		writeJSON(w, http.StatusNotFound, detail("Company not found"))
		return 0, false
	}
	return id, true
}

func (a *API) getOptOut(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	s, err := a.book.OptOutSettings(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// optOutBody is the PUT body: every list is required (an empty list is a
// choice, a missing one a mistake).
type optOutBody struct {
	OptOutKeywords *[]string `json:"opt_out_keywords"`
	OptInKeywords  *[]string `json:"opt_in_keywords"`
	OptOutPayloads *[]string `json:"opt_out_payloads"`
}

func (a *API) putOptOut(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(raw) > 1<<20 {
		writeJSON(w, http.StatusBadRequest, detail("The body must be a JSON object of at most 1 MiB"))
		return
	}
	var b optOutBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || dec.More() {
		writeJSON(w, http.StatusBadRequest, detail("The body must be a JSON object with opt_out_keywords, opt_in_keywords and opt_out_payloads, arrays of strings"))
		return
	}
	if b.OptOutKeywords == nil || b.OptInKeywords == nil || b.OptOutPayloads == nil {
		writeJSON(w, http.StatusUnprocessableEntity, detail("opt_out_keywords, opt_in_keywords and opt_out_payloads are all required (an empty array empties a list)"))
		return
	}
	s, err := a.book.SetOptOutSettings(r.Context(), id, contacts.OptOutSettings{
		OptOutKeywords: *b.OptOutKeywords, OptInKeywords: *b.OptInKeywords, OptOutPayloads: *b.OptOutPayloads,
	})
	if errors.Is(err, contacts.ErrInvalidSettings) {
		writeJSON(w, http.StatusUnprocessableEntity, detail(err.Error()))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *API) resetOptOut(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	s, err := a.book.ResetOptOutSettings(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *API) getContact(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	c, err := a.book.ByPhone(r.Context(), id, r.PathValue("phone"))
	switch {
	case errors.Is(err, contacts.ErrInvalidPhone), errors.Is(err, contacts.ErrNotFound):
		writeJSON(w, http.StatusNotFound, detail("Contact not found"))
		return
	case err != nil:
		a.fail(w, r, err)
		return
	}
	h, err := a.book.OptOutHistory(r.Context(), id, c.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"contact": c, "opted_out": c.OptedOut(), "opt_out_history": h})
}
