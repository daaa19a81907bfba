// Package httpapi is the gateway's HTTP edge: the public API under /api with
// its order of checks (401, 403, 429, 422, 404, 422, 202), the provider's
// webhooks, and the hardening every answer gets. Domain errors become
// statuses here and nowhere else.
package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/gateway/internal/apidoc"
)

// Config tunes the edge.
type Config struct {
	// MaxBodyBytes is the largest request body accepted (413 above it).
	MaxBodyBytes int64
	// IdempotencyTimeout bounds each Idempotency-Key record update, its
	// retries included (the store tries three times, each with a share).
	IdempotencyTimeout time.Duration
	// AccessLog logs one line per request (errors are always logged).
	AccessLog bool
	// Webhook holds the provider webhooks' secrets.
	Webhook WebhookConfig
	// MaxExports bounds the CSV downloads running at once (each holds a
	// database connection): more is 503. 0 is 1.
	MaxExports int
}

// Deps are the ports the edge calls.
type Deps struct {
	Auth        Authenticator
	Limiter     Limiter
	Sends       Sender
	Idempotency Idempotency
	Batches     BatchReader
	// Control cancels batches and lists their messages.
	Control  BatchControl
	Statuses StatusSink
	Segments Segments
	// Conversations reads and erases contacts; Replies accepts replies.
	Conversations Conversations
	Replies       Replier
	// Reports reads campaign and automation reports.
	Reports Reports
	// Exports streams messages as CSV.
	Exports Exports
	// Docs is the OpenAPI document and its page (apidoc.Build(DocLimits())).
	Docs    *apidoc.Document
	Metrics prometheus.Registerer
	Log     *zap.Logger
}

type handlers struct {
	cfg           Config
	webhook       WebhookConfig
	sends         Sender
	idem          Idempotency
	batches       BatchReader
	control       BatchControl
	statuses      StatusSink
	segments      Segments
	conversations Conversations
	replier       Replier
	reports       Reports
	exports       Exports
	exportSlots   chan struct{}
	log           *zap.Logger
}

// New returns the gateway's handler for everything but the probes.
func New(cfg Config, d Deps) http.Handler {
	h := &handlers{cfg: cfg, webhook: cfg.Webhook, sends: d.Sends, idem: d.Idempotency,
		batches: d.Batches, control: d.Control, statuses: d.Statuses, segments: d.Segments,
		conversations: d.Conversations, replier: d.Replies, reports: d.Reports, exports: d.Exports,
		exportSlots: make(chan struct{}, max(cfg.MaxExports, 1)), log: d.Log}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	e.Use(requestID, recoverPanics(d.Log), secureHeaders, observe(newMetrics(d.Metrics), d.Log, cfg.AccessLog))
	e.NoRoute(func(c *gin.Context) { abortDetail(c, http.StatusNotFound, msgNotFound) })
	e.NoMethod(func(c *gin.Context) { abortDetail(c, http.StatusMethodNotAllowed, msgMethod) })

	authed := authenticate(d.Auth, d.Log)
	api := func(r Route, handler gin.HandlerFunc) {
		e.Handle(r.Method, r.Path, authed, limit(d.Limiter, r), handler)
	}
	api(RouteCampaignSend, h.sendCampaign)
	api(RouteAutomationSend, h.triggerAutomation)
	api(RouteSegmentCreate, h.createSegment)
	api(RouteSegmentContacts, h.addSegmentContacts)
	api(RouteBatchSend, h.sendBatch)
	// gin prefers a static segment to this parameter whatever the order of
	// registration: /api/campaigns/send and the others stay theirs, and
	// their first segments are reserved connector names (catalog).
	api(RouteConnectorSend, h.sendViaConnector)
	api(RouteBatchStatus, h.batchStatus)
	api(RouteBatchCancel, h.cancelBatch)
	api(RouteBatchMessages, h.batchMessages)
	api(RouteBatchList, h.listBatches)
	api(RouteMessage, h.message)
	api(RouteContactMessages, h.contactMessages)
	api(RouteContact, h.contact)
	api(RouteContactErase, h.eraseContact)
	api(RouteConversations, h.conversationList)
	api(RouteMessageSend, h.sendMessage)
	api(RouteSegmentList, h.listSegments)
	api(RouteSegmentRead, h.getSegment)
	api(RouteSegmentRename, h.renameSegment)
	api(RouteSegmentDelete, h.deleteSegment)
	api(RouteSegmentContactsRemove, h.removeSegmentContacts)
	api(RouteCampaignReport, h.campaignReport)
	api(RouteAutomationReport, h.automationReport)
	api(RouteBatchExport, h.batchExport)
	api(RouteCampaignExport, h.campaignExport)
	api(RouteAutomationExport, h.automationExport)
	api(RouteMessagesExport, h.messagesExport)
	if d.Docs != nil {
		e.GET(OpenAPIPath, serveDoc(d.Docs, "application/json", d.Docs.JSON, ""))
		e.GET(DocsPath, serveDoc(d.Docs, "text/html; charset=utf-8", d.Docs.HTML, docsCSP(d.Docs)))
	}

	// The provider's callbacks: authenticated by their signature, not a key.
	e.GET(WebhookPath, h.webhookVerify)
	e.POST(WebhookPath, h.webhookStatuses)
	return e
}
