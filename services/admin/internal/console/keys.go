package console

import (
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/services/admin/internal/credentials"
)

// auditEntries is how much of the audit trail the page shows.
const auditEntries = 50

func actorOf(u accounts.User) apikey.Actor {
	id := u.ID
	return apikey.Actor{UserID: &id, Label: u.Email}
}

func (c *Console) credentialsPage(w http.ResponseWriter, r *http.Request) {
	c.renderCredentials(w, r, http.StatusOK, nil)
}

// renderCredentials renders the page; newKey is set only by the create or
// rotate that made the key, so the full value is in this one response.
func (c *Console) renderCredentials(w http.ResponseWriter, r *http.Request, status int, newKey *newKeyView) {
	u := currentUser(r.Context())
	co, err := c.Credentials.Company(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	o, err := c.Credentials.Overview(r.Context(), u.CompanyID, auditEntries)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, status, c.pages.credentials, view{
		Title: "Credentials", Nav: "credentials", User: &u, Company: co,
		Page: credentialsView{Overview: o, CanManage: u.IsAdmin(), NewKey: newKey},
	})
}

func (c *Console) flash(r *http.Request, ok bool, msg string) {
	key := sessionFlashNo
	if ok {
		key = sessionFlashOK
	}
	c.Sessions.Put(r.Context(), key, msg)
}

func (c *Console) backToCredentials(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, PathCredentials, http.StatusSeeOther)
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	full, key, err := c.Credentials.Create(r.Context(), u.CompanyID, actorOf(u))
	if errors.Is(err, apikey.ErrActiveKeyExists) {
		c.flash(r, false, "Your company already has an active API key. Rotate it to get a new one.")
		c.backToCredentials(w, r)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("API key created", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("key_id", key.KeyID))
	c.renderCredentials(w, r, http.StatusOK, &newKeyView{Full: full, Key: key})
}

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "The form could not be read", "Please go back and try again.")
		return
	}
	u := currentUser(r.Context())
	// key_id is the key the admin saw: a resubmitted form (reload, double
	// click) finds another key active and changes nothing.
	expect := r.PostForm.Get("key_id")
	if expect == "" {
		c.renderError(w, r, http.StatusBadRequest, "The form could not be read", "Please go back and try again.")
		return
	}
	full, created, previous, err := c.Credentials.Rotate(r.Context(), u.CompanyID, expect, actorOf(u))
	switch {
	case errors.Is(err, credentials.ErrStale):
		c.flash(r, false, "The key was not rotated: it had already changed since the page was loaded. This is the current state.")
		c.backToCredentials(w, r)
		return
	case errors.Is(err, apikey.ErrNoActiveKey):
		c.flash(r, false, "There is no active API key to rotate. Create one instead.")
		c.backToCredentials(w, r)
		return
	case err != nil:
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("API key rotated", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID),
		zap.String("key_id", created.KeyID), zap.String("previous_key_id", previous.KeyID))
	c.renderCredentials(w, r, http.StatusOK, &newKeyView{Full: full, Key: created, Rotated: true, Previous: previous})
}

// revocable finds a key of the company that can still be revoked.
func (c *Console) revocable(r *http.Request, keyID string) (apikey.Key, bool, bool, error) {
	o, err := c.Credentials.Overview(r.Context(), currentUser(r.Context()).CompanyID, 0)
	if err != nil {
		return apikey.Key{}, false, false, err
	}
	if o.Active != nil && o.Active.KeyID == keyID {
		return *o.Active, true, true, nil
	}
	for _, k := range o.InGrace {
		if k.KeyID == keyID {
			return k, false, true, nil
		}
	}
	return apikey.Key{}, false, false, nil
}

func (c *Console) revokeConfirmPage(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	key, active, ok, err := c.revocable(r, r.PathValue("keyID"))
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if !ok {
		c.flash(r, false, "That key is no longer in use: it was already revoked or has expired.")
		c.backToCredentials(w, r)
		return
	}
	co, err := c.Credentials.Company(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, c.pages.revokeConfirm, view{
		Title: "Revoke API key", Nav: "credentials", User: &u, Company: co,
		Page: revokeView{Now: c.Credentials.Now(), Key: key, Active: active},
	})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "The form could not be read", "Please go back and try again.")
		return
	}
	keyID := r.PathValue("keyID")
	if r.PostForm.Get("confirm") != "yes" {
		// Revocation cannot be undone: it happens only from the
		// confirmation page, which says what will break.
		http.Redirect(w, r, PathCredentials+"/keys/"+keyID+"/revoke", http.StatusSeeOther)
		return
	}
	u := currentUser(r.Context())
	key, err := c.Credentials.Revoke(r.Context(), u.CompanyID, keyID, actorOf(u))
	switch {
	case errors.Is(err, apikey.ErrNotFound):
		c.renderError(w, r, http.StatusNotFound, "Key not found", "Your company has no API key with this id.")
		return
	case errors.Is(err, apikey.ErrAlreadyRevoked):
		c.flash(r, false, "That key was already revoked.")
		c.backToCredentials(w, r)
		return
	case err != nil:
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("API key revoked", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("key_id", key.KeyID))
	c.flash(r, true, "Key "+key.Masked()+" was revoked. Requests that use it are now refused with 401.")
	c.backToCredentials(w, r)
}
