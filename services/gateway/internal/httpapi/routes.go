package httpapi

import (
	"net/http"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/services/gateway/internal/apidoc"
)

// WebhookPath receives the WhatsApp Cloud API's status callbacks.
const WebhookPath = "/webhooks/whatsapp"

// Route is one endpoint of the public API and its rate limit, counted per
// company (spec section 8). This table is the only place a rate is written.
type Route struct {
	// Name keys the limiter and labels metrics.
	Name   string
	Method string
	Path   string
	Limit  ratelimit.Limit
}

// The public API. GET /api/batches/{batch_id} is ours (the spec names no
// limit for it): 20 per second per company, as generous as the busiest send.
var (
	RouteCampaignSend    = Route{"campaigns_send", http.MethodPost, "/api/campaigns/send", ratelimit.PerSecond(10)}
	RouteAutomationSend  = Route{"automations_send", http.MethodPost, "/api/automations/send", ratelimit.PerSecond(20)}
	RouteSegmentCreate   = Route{"segments_create", http.MethodPost, "/api/segments/create", ratelimit.PerSecond(10)}
	RouteSegmentContacts = Route{"segment_contacts", http.MethodPost, "/api/segments/:segment_id/contacts", ratelimit.PerMinute(1)}
	RouteBatchSend       = Route{"batch_send", http.MethodPost, "/api/batch/send", ratelimit.Every(1, 10*time.Second)}
	RouteConnectorSend   = Route{"connector_send", http.MethodPost, "/api/:connector/send", ratelimit.Every(1, 10*time.Second)}
	RouteBatchStatus     = Route{"batch_status", http.MethodGet, "/api/batches/:batch_id", ratelimit.PerSecond(20)}
	// Cancel changes what is sent, like a send: the campaign send's 10 per
	// second. The message listing reads, like the batch status: 20.
	RouteBatchCancel   = Route{"batch_cancel", http.MethodPost, "/api/batches/:batch_id/cancel", ratelimit.PerSecond(10)}
	RouteBatchMessages = Route{"batch_messages", http.MethodGet, "/api/batches/:batch_id/messages", ratelimit.PerSecond(20)}
	// The list reads a page of up to 100 batches: half the reads' 20. A
	// message found by id or wamid reads one row, like a batch's status.
	RouteBatchList = Route{"batch_list", http.MethodGet, "/api/batches", ratelimit.PerSecond(10)}
	RouteMessage   = Route{"message", http.MethodGet, "/api/messages/:message_id", ratelimit.PerSecond(20)}
	// A number's messages read a page, like a batch's: 20.
	RouteContactMessages = Route{"contact_messages", http.MethodGet, "/api/contacts/:phone/messages", ratelimit.PerSecond(20)}
	// Conversations. A contact and the list read like a batch's status. An
	// erasure rewrites every message of the number and reads the company's
	// webhook deliveries: one per second is plenty for what GDPR requests
	// ask. A reply is one message, answered inside a conversation: 100 per
	// second per company (a contact center's agents all answering), above
	// what one number may send (80 per second by default) and below what a
	// number raised to 1,000 can.
	RouteContact       = Route{"contact", http.MethodGet, "/api/contacts/:phone", ratelimit.PerSecond(20)}
	RouteContactErase  = Route{"contact_erase", http.MethodDelete, "/api/contacts/:phone", ratelimit.PerSecond(1)}
	RouteConversations = Route{"conversations", http.MethodGet, "/api/conversations", ratelimit.PerSecond(20)}
	RouteMessageSend   = Route{"messages_send", http.MethodPost, "/api/messages", ratelimit.PerSecond(100)}
	// Segments: reads as the batch status (a page is at most 100 small
	// rows); a rename or delete changes one row, as a cancel. A removal
	// takes up to 1000 members out at a time: one per second, a burst of
	// removals being no integrator's need.
	RouteSegmentList           = Route{"segments_list", http.MethodGet, "/api/segments", ratelimit.PerSecond(20)}
	RouteSegmentRead           = Route{"segment_read", http.MethodGet, "/api/segments/:segment_id", ratelimit.PerSecond(20)}
	RouteSegmentRename         = Route{"segment_rename", http.MethodPatch, "/api/segments/:segment_id", ratelimit.PerSecond(10)}
	RouteSegmentDelete         = Route{"segment_delete", http.MethodDelete, "/api/segments/:segment_id", ratelimit.PerSecond(10)}
	RouteSegmentContactsRemove = Route{"segment_contacts_remove", http.MethodDelete, "/api/segments/:segment_id/contacts", ratelimit.PerSecond(1)}
	// Reports read a few hundred counter rows whatever the campaign's
	// size: 5 per second, for dashboards that refresh a handful at once.
	RouteCampaignReport   = Route{"campaign_report", http.MethodGet, "/api/campaigns/:campaign_id/report", ratelimit.PerSecond(5)}
	RouteAutomationReport = Route{"automation_report", http.MethodGet, "/api/automations/:automation_id/report", ratelimit.PerSecond(5)}
	// An export reads up to a year of messages (a million rows is tens of
	// seconds) in one snapshot, holding one of the gateway's database
	// connections until the download ends: one every 10 seconds per
	// company and endpoint, like the batch send, is what a person or a
	// nightly job needs, and keeps a company from holding many connections
	// at once (MaxExports bounds them across companies).
	RouteBatchExport      = Route{"batch_export", http.MethodGet, "/api/batches/:batch_id/export", ratelimit.Every(1, 10*time.Second)}
	RouteCampaignExport   = Route{"campaign_export", http.MethodGet, "/api/campaigns/:campaign_id/export", ratelimit.Every(1, 10*time.Second)}
	RouteAutomationExport = Route{"automation_export", http.MethodGet, "/api/automations/:automation_id/export", ratelimit.Every(1, 10*time.Second)}
	RouteMessagesExport   = Route{"messages_export", http.MethodGet, "/api/exports/messages", ratelimit.Every(1, 10*time.Second)}
)

// Routes is the route table: every limited endpoint of the public API.
var Routes = []Route{RouteCampaignSend, RouteAutomationSend, RouteSegmentCreate, RouteSegmentContacts,
	RouteBatchSend, RouteConnectorSend, RouteBatchStatus, RouteBatchCancel, RouteBatchMessages, RouteBatchList, RouteMessage, RouteContactMessages,
	RouteContact, RouteContactErase, RouteConversations, RouteMessageSend,
	RouteSegmentList, RouteSegmentRead, RouteSegmentRename, RouteSegmentDelete, RouteSegmentContactsRemove,
	RouteCampaignReport, RouteAutomationReport,
	RouteBatchExport, RouteCampaignExport, RouteAutomationExport, RouteMessagesExport}

// DocLimits is the route table as the OpenAPI document states it.
func DocLimits() []apidoc.Limit {
	out := make([]apidoc.Limit, len(Routes))
	for i, r := range Routes {
		out[i] = apidoc.Limit{Method: r.Method, Path: r.Path, Name: r.Name, Rate: r.Limit.Rate, Period: r.Limit.Period, Text: r.Limit.String()}
	}
	return out
}

// Paths of the documentation, served without a key and without a limit:
// they are the same for everyone and served from memory.
const (
	OpenAPIPath = "/api/openapi.json"
	DocsPath    = "/api/docs"
)
