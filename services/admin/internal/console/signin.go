package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/admin/internal/accounts"
)

// maxFormBytes bounds a console form body.
const maxFormBytes = 16 << 10

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, ok, err := c.signedIn(r); err != nil {
		c.serverError(w, r, err)
		return
	} else if ok {
		http.Redirect(w, r, PathHome, http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, c.pages.signIn, view{Title: "Sign in", Page: signInView{}})
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderSignIn(w, r, http.StatusBadRequest, "", "The form could not be read. Please try again.")
		return
	}
	email, password := r.PostForm.Get("email"), r.PostForm.Get("password")
	if email == "" || password == "" {
		c.renderSignIn(w, r, http.StatusUnprocessableEntity, email, "Enter your email address and your password.")
		return
	}
	subject := accounts.NormalizeEmail(email)
	if len(subject) > 320 {
		// No such address can exist; not worth a row in the throttle.
		c.renderSignIn(w, r, http.StatusUnauthorized, "", "The email address or password is incorrect.")
		return
	}
	ip := c.clientIP(r)
	wait, err := c.Throttle.Check(r.Context(), subject, ip)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if wait > 0 {
		// Refused before the password is checked, so that guessing on
		// gets no answer at all.
		c.Log.Warn("sign-in throttled", zap.String("client_ip", ip.String()), zap.Duration("retry_after", wait))
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		c.renderSignIn(w, r, http.StatusTooManyRequests, email,
			fmt.Sprintf("Too many failed sign-in attempts. For your security, sign-in is paused; try again in %s.", minutes(wait)))
		return
	}
	u, err := c.Users.Authenticate(r.Context(), email, password)
	if errors.Is(err, accounts.ErrInvalidCredentials) {
		if err := c.Throttle.RecordFailure(r.Context(), subject, ip); err != nil {
			c.serverError(w, r, err)
			return
		}
		c.Log.Info("sign-in failed", zap.String("client_ip", ip.String()))
		c.renderSignIn(w, r, http.StatusUnauthorized, email, "The email address or password is incorrect.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if err := c.Throttle.Reset(r.Context(), subject); err != nil {
		c.serverError(w, r, err)
		return
	}
	next := safeNext(c.Sessions.PopString(r.Context(), sessionNext))
	// A fresh token at the change of privilege: a token planted before
	// sign-in (session fixation) is worth nothing after it.
	if err := c.Sessions.RenewToken(r.Context()); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.Sessions.Put(r.Context(), sessionUserID, u.ID)
	c.Log.Info("signed in", zap.Int64("user_id", u.ID), zap.Int64("company_id", u.CompanyID), zap.String("client_ip", ip.String()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, email, msg string) {
	c.render(w, r, status, c.pages.signIn, view{Title: "Sign in", Page: signInView{Email: email, Error: msg}})
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.Sessions.Destroy(r.Context()); err != nil {
		c.serverError(w, r, err)
		return
	}
	// Destroy dropped the old token; this notice travels in a new one.
	c.Sessions.Put(r.Context(), sessionFlashOK, "You have signed out.")
	http.Redirect(w, r, PathSignIn, http.StatusSeeOther)
}

// minutes writes a wait rounded up to whole minutes.
func minutes(d time.Duration) string {
	m := int(math.Ceil(d.Minutes()))
	if m <= 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}
