// Package console is the company-facing admin console: sign-in, and the
// Credentials page (Settings > Integrations & developers > Credentials) where
// admins create, rotate and revoke the company's API key and everyone in the
// company sees its masked value and audit trail.
//
// Pages are rendered on the server with html/template; the CSS, the favicon
// and a small script (the copy button) are embedded and served from /assets/.
// Every page works without JavaScript.
//
// Security choices:
//   - Sessions: github.com/alexedwards/scs/v2 with its pgxstore, so a
//     session survives a restart and is shared by every replica. The store
//     keeps only SHA-256 of each token. The cookie is HttpOnly, SameSite=Lax,
//     Secure (with the __Host- prefix) when the console is served over TLS,
//     and its token is renewed at sign-in and sign-out (no fixation).
//   - CSRF: Go's net/http.CrossOriginProtection rather than
//     gorilla/csrf. It rejects any non-GET/HEAD/OPTIONS request that the
//     browser marks as cross-origin (Sec-Fetch-Site, or an Origin that is not
//     the Host), so it needs no secret, no token in every form and no cookie,
//     and it cannot be forgotten on a new form. Every browser the console
//     supports sends those headers; SameSite=Lax on the session cookie is a
//     second, independent barrier. gorilla/csrf would add a key to manage
//     and rotate, and its Origin checks carry an advisory with no fixed
//     version (CVE-2025-47909, trusted origins ignore the scheme) whose
//     advice is to move to CrossOriginProtection.
//   - Roles: the server checks the role on every action (403 for members),
//     not only by hiding buttons; the user is read from the database on
//     every request, so a demoted user loses rights at once.
//   - A new key's full value is written into the response to the POST that
//     made it, and nowhere else: not the session, not a log, not a cache
//     (every page is Cache-Control: no-store).
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/services/admin/internal/batches"
	"github.com/parleyhq/parley/services/admin/internal/conversations"
	"github.com/parleyhq/parley/services/admin/internal/credentials"
	"github.com/parleyhq/parley/services/admin/internal/loginthrottle"
	"github.com/parleyhq/parley/services/admin/internal/reports"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Paths of the console.
const (
	PathSignIn      = "/login"
	PathSignOut     = "/logout"
	PathCredentials = "/settings/integrations/credentials"
	PathSends       = "/sends"
	// PathHome is where a signed-in user lands, admin or member: the
	// company's sends, what the console is mostly opened to check.
	PathHome = PathSends
)

// Deps is what the console needs.
type Deps struct {
	Users       *accounts.Store
	Throttle    *loginthrottle.Throttle
	Credentials *credentials.Service
	Sends       *batches.Store
	// Reports reads the campaigns' and automations' reports.
	Reports  *reports.Store
	Webhooks *webhooks.Store
	// Conversations reads conversations and sends replies.
	Conversations *conversations.Store
	// Templates reads and creates templates, numbers and portfolios.
	Templates TemplateDeps
	Sessions  *scs.SessionManager
	Log       *zap.Logger
	// TrustedOrigins may post forms besides the console's own origin.
	TrustedOrigins []string
	// TrustForwardedFor takes the client address from X-Forwarded-For.
	TrustForwardedFor bool
	// Now is the clock of countdowns (time.Now when nil).
	Now func() time.Time
}

// SessionOptions configure the session cookie and lifetime.
type SessionOptions struct {
	Secure      bool
	Lifetime    time.Duration
	IdleTimeout time.Duration
}

// NewSessions returns the session manager, storing sessions in PostgreSQL.
// Expired rows are removed by SweepSessions, not by pgxstore's own goroutine,
// so that the sweep stops with the app.
func NewSessions(pool *pgxpool.Pool, opts SessionOptions) *scs.SessionManager {
	sm := scs.New()
	sm.Store = pgxstore.NewWithCleanupInterval(pool, 0)
	sm.HashTokenInStore = true
	sm.Lifetime = opts.Lifetime
	sm.IdleTimeout = opts.IdleTimeout
	sm.Cookie.Name = "parley_session"
	if opts.Secure {
		// __Host-: the browser accepts it only Secure, from this host, on "/".
		sm.Cookie.Name = "__Host-parley_session"
	}
	sm.Cookie.HttpOnly = true
	sm.Cookie.Secure = opts.Secure
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Path = "/"
	// A console sign-in ends with the browser; Lifetime still bounds it.
	sm.Cookie.Persist = false
	return sm
}

// SweepSessions deletes expired sessions every interval until ctx ends.
func SweepSessions(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, log *zap.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := pool.Exec(ctx, `DELETE FROM sessions WHERE expiry < now()`); err != nil && ctx.Err() == nil {
				log.Warn("sweep expired sessions", zap.Error(err))
			}
		}
	}
}

// Console serves the console's pages.
type Console struct {
	Deps
	pages   *pages
	handler http.Handler
	// downloads holds a token per CSV download running (routeExports).
	downloads chan struct{}
}

// New builds the console's handler.
func New(d Deps) (*Console, error) {
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{Deps: d, pages: p}

	cop := http.NewCrossOriginProtection()
	for _, o := range d.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Log.Warn("cross-origin request refused", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.String("origin", r.Header.Get("Origin")), zap.String("sec_fetch_site", r.Header.Get("Sec-Fetch-Site")))
		c.renderError(w, r, http.StatusForbidden, "Request blocked",
			"This form was sent from another site, so it was not carried out. Open the console directly and try again.")
	}))
	d.Sessions.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		c.serverError(w, r, fmt.Errorf("session: %w", err))
	}

	pagesMux := http.NewServeMux()
	pagesMux.HandleFunc("GET /{$}", c.home)
	pagesMux.HandleFunc("GET "+PathSignIn, c.signInPage)
	pagesMux.HandleFunc("POST "+PathSignIn, c.signIn)
	pagesMux.HandleFunc("POST "+PathSignOut, c.signOut)
	pagesMux.Handle("GET "+PathCredentials, c.requireUser(c.credentialsPage))
	pagesMux.Handle("POST "+PathCredentials+"/create", c.requireAdmin(c.createKey))
	pagesMux.Handle("POST "+PathCredentials+"/rotate", c.requireAdmin(c.rotateKey))
	pagesMux.Handle("GET "+PathCredentials+"/keys/{keyID}/revoke", c.requireAdmin(c.revokeConfirmPage))
	pagesMux.Handle("POST "+PathCredentials+"/keys/{keyID}/revoke", c.requireAdmin(c.revokeKey))
	pagesMux.Handle("GET "+PathSends, c.requireUser(c.sendsPage))
	pagesMux.Handle("GET "+PathSends+"/{batchID}", c.requireUser(c.batchPage))
	pagesMux.Handle("GET "+PathSends+"/{batchID}/cancel", c.requireAdminFor(cancelReserved, c.cancelConfirmPage))
	pagesMux.Handle("POST "+PathSends+"/{batchID}/cancel", c.requireAdminFor(cancelReserved, c.cancelBatch))
	c.routeReports(pagesMux)
	c.routeWebhooks(pagesMux)
	c.routeConversations(pagesMux)
	c.routeExports(pagesMux)
	c.routeTemplates(pagesMux)
	pagesMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, http.StatusNotFound, "Page not found", "There is nothing at this address.")
	})

	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	files := http.FileServerFS(assets)
	root := http.NewServeMux()
	root.Handle("GET /assets/", http.StripPrefix("/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})))
	root.Handle("/", noStore(cop.Handler(d.Sessions.LoadAndSave(markSessionLoaded(pagesMux)))))
	c.handler = securityHeaders(root)
	return c, nil
}

// now is the console's clock.
func (c *Console) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// contentSecurityPolicy allows only the console's own assets: no inline
// script or style, no framing, forms posting only to the console.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// noStore keeps pages (one of which shows a new key) out of every cache,
// the browser's back-forward cache included.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type userKey struct{}

// sessionLoadedKey marks a request whose session scs has loaded: only then
// may a handler read or write session values (scs panics otherwise).
type sessionLoadedKey struct{}

func markSessionLoaded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionLoadedKey{}, true)))
	})
}

// currentUser is the signed-in user put in the context by requireUser.
func currentUser(ctx context.Context) accounts.User {
	u, _ := ctx.Value(userKey{}).(accounts.User)
	return u
}

const (
	sessionUserID  = "user_id"
	sessionNext    = "next"
	sessionFlashOK = "flash_ok"
	sessionFlashNo = "flash_error"
)

// signedIn returns the session's user, reading it afresh from the database.
func (c *Console) signedIn(r *http.Request) (accounts.User, bool, error) {
	id := c.Sessions.GetInt64(r.Context(), sessionUserID)
	if id == 0 {
		return accounts.User{}, false, nil
	}
	u, err := c.Users.User(r.Context(), id)
	if errors.Is(err, accounts.ErrNotFound) {
		// The user was deleted: the session is worthless.
		return accounts.User{}, false, c.Sessions.Destroy(r.Context())
	}
	if err != nil {
		return accounts.User{}, false, err
	}
	return u, true, nil
}

// requireUser sends visitors who are not signed in to the sign-in page, and
// brings them back to the page they asked for afterwards.
func (c *Console) requireUser(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := c.signedIn(r)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if !ok {
			if r.Method == http.MethodGet {
				c.Sessions.Put(r.Context(), sessionNext, r.URL.Path)
			}
			http.Redirect(w, r, PathSignIn, http.StatusSeeOther)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// Why a member is refused an admin action.
const (
	keysReserved   = "Creating, rotating and revoking the API key is reserved for your company's admins. Ask one of them if the key needs to change."
	cancelReserved = "Cancelling a send is reserved for your company's admins. Ask one of them if this send must stop."
	hooksReserved  = "Adding, changing and deleting webhook endpoints is reserved for your company's admins. Ask one of them if an endpoint needs to change."
)

// requireAdmin is requireUser that also refuses members with 403, whatever
// the page showed them.
func (c *Console) requireAdmin(next http.HandlerFunc) http.Handler {
	return c.requireAdminFor(keysReserved, next)
}

// requireAdminFor is requireAdmin, saying reserved to the member refused.
func (c *Console) requireAdminFor(reserved string, next http.HandlerFunc) http.Handler {
	return c.requireUser(func(w http.ResponseWriter, r *http.Request) {
		u := currentUser(r.Context())
		if !u.IsAdmin() {
			c.Log.Warn("member refused an admin action", zap.Int64("user_id", u.ID), zap.Int64("company_id", u.CompanyID),
				zap.String("method", r.Method), zap.String("path", r.URL.Path))
			c.renderError(w, r, http.StatusForbidden, "Only admins can do this", reserved)
			return
		}
		next(w, r)
	})
}

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, PathHome, http.StatusSeeOther)
}

// clientIP is the address sign-in failures are counted under.
func (c *Console) clientIP(r *http.Request) netip.Addr {
	if c.TrustForwardedFor {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if ip, err := netip.ParseAddr(strings.TrimSpace(parts[len(parts)-1])); err == nil {
				return ip
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.IPv4Unspecified()
	}
	return ip
}

// safeNext accepts only a path on this site as a place to return to.
func safeNext(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || p == PathSignIn {
		return PathHome
	}
	return p
}
