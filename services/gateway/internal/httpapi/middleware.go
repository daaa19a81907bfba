package httpapi

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/services/gateway/internal/auth"
)

// ctxPrincipal is where the auth middleware leaves the caller.
const ctxPrincipal = "parley.principal"

func principal(c *gin.Context) auth.Principal {
	v, _ := c.Get(ctxPrincipal)
	p, _ := v.(auth.Principal)
	return p
}

// ctxRequestID is where requestID leaves the request's id.
const ctxRequestID = "parley.request_id"

// RequestIDHeader carries a request's id, both ways.
const RequestIDHeader = "X-Request-ID"

// requestID gives every request an id to quote in a support ticket: the
// caller's X-Request-ID when it is sane (1 to 128 of A-Z a-z 0-9 and
// . _ : - +, so it cannot forge a log line), else a new UUID. The answer
// carries it in X-Request-ID, whatever its status, and the request's log
// line has it.
func requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !saneRequestID(id) {
		id = uuid.NewString()
	}
	c.Set(ctxRequestID, id)
	c.Writer.Header()[RequestIDHeader] = []string{id}
	c.Next()
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == ':', b == '-', b == '+':
		default:
			return false
		}
	}
	return true
}

// secureHeaders marks every answer as JSON that must not be sniffed, framed,
// cached or sent as a referrer.
func secureHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Security-Policy"] = []string{"default-src 'none'; frame-ancestors 'none'"}
	h["X-Frame-Options"] = []string{"DENY"}
	c.Next()
}

// recoverPanics turns a panic into 500 {"detail":"Internal server error"} and
// logs it with its stack, never the request body or headers.
func recoverPanics(log *zap.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v) // the client went away; let net/http handle it
				}
				log.Error("panic in handler", zap.String("route", c.FullPath()), zap.String("request_id", c.GetString(ctxRequestID)), zap.Any("panic", v),
					zap.ByteString("stack", debug.Stack()))
				if !c.Writer.Written() {
					abortDetail(c, http.StatusInternalServerError, msgInternal)
				}
				c.Abort()
			}
		}()
		c.Next()
	}
}

// metrics counts requests by route and status and times them. The series
// of a route are looked up once and kept, not hashed from labels per request.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	routes   sync.Map // route -> *routeMetrics
}

type routeMetrics struct {
	route    string
	duration prometheus.Observer
	statuses sync.Map // status int -> prometheus.Counter
}

func (m *metrics) forRoute(route string) *routeMetrics {
	if v, ok := m.routes.Load(route); ok {
		return v.(*routeMetrics)
	}
	v, _ := m.routes.LoadOrStore(route, &routeMetrics{route: route, duration: m.duration.WithLabelValues(route)})
	return v.(*routeMetrics)
}

func (m *metrics) observe(route string, status int, elapsed time.Duration) {
	r := m.forRoute(route)
	r.duration.Observe(elapsed.Seconds())
	c, ok := r.statuses.Load(status)
	if !ok {
		c, _ = r.statuses.LoadOrStore(status, m.requests.WithLabelValues(route, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_requests_total",
			Help: "Requests answered, by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_gateway_request_duration_seconds",
			Help:    "Time to answer, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe records metrics and, when accessLog is on, one log line per request
// with its route, status, latency and company; never keys or bodies.
func observe(m *metrics, log *zap.Logger, accessLog bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		elapsed := time.Since(start)
		m.observe(route, status, elapsed)
		if accessLog || status >= 500 {
			fields := []zap.Field{
				zap.String("method", c.Request.Method), zap.String("route", route),
				zap.Int("status", status), zap.Duration("latency", elapsed),
				zap.String("request_id", c.GetString(ctxRequestID)),
			}
			if p := principal(c); p.CompanyID != 0 {
				fields = append(fields, zap.Int64("company_id", p.CompanyID))
			}
			if id, ok := c.Get(ctxBatchID); ok {
				fields = append(fields, zap.Any("batch_id", id))
			}
			if status >= 500 {
				log.Error("request", fields...)
			} else {
				log.Info("request", fields...)
			}
		}
	}
}

// Authenticator is what the auth middleware needs.
type Authenticator interface {
	Authenticate(ctx context.Context, header string) (auth.Principal, error)
}

// authenticate answers 401 or 403 before anything else runs (spec 5).
func authenticate(a Authenticator, log *zap.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := a.Authenticate(c.Request.Context(), c.GetHeader("service-api-key"))
		switch {
		case err == nil:
			c.Set(ctxPrincipal, p)
			c.Next()
		case errors.Is(err, auth.ErrInvalidKey):
			abortDetail(c, http.StatusUnauthorized, msgInvalidKey)
		case errors.Is(err, auth.ErrSubscriptionRequired):
			abortDetail(c, http.StatusForbidden, msgSubscription)
		case errors.Is(err, auth.ErrNotProvisioned):
			abortDetail(c, http.StatusForbidden, msgNotProvisioned)
		default:
			log.Error("authenticate", zap.Error(err))
			abortUnavailable(c)
		}
	}
}

// Limiter is what the rate-limit middleware needs (pkg/ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, key string, lim ratelimit.Limit) ratelimit.Result
}

// limit applies a route's limit per company, after auth (spec 7.3 order),
// on the key ratelimit.CompanyKey gives (all of a company's limits in one
// Redis Cluster slot).
// Every limited response carries the X-RateLimit-* headers.
func limit(l Limiter, r Route) gin.HandlerFunc {
	tooMany := []byte(`{"error":"Rate limit exceeded: ` + r.Limit.String() + `"}`)
	return func(c *gin.Context) {
		p := principal(c)
		res := l.Allow(c.Request.Context(), ratelimit.CompanyKey(p.CompanyID, r.Name), r.Limit)
		res.SetHeaders(c.Writer.Header())
		if !res.Allowed {
			writeJSON(c, http.StatusTooManyRequests, tooMany)
			c.Abort()
			return
		}
		c.Next()
	}
}
