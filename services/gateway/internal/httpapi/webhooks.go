package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// StatusSink records the provider's status callbacks (record.ApplyStatuses) and the
// messages users send (record.Receive: the conversation, opt-out and opt-in
// keywords, message.received events).
type StatusSink interface {
	ApplyStatuses(ctx context.Context, updates []whatsapp.StatusUpdate) error
	// ReceiveMessages records inbound messages (record.Receive): each once
	// per wamid with its content, its sender a contact whose opt-out words
	// change its consent, its conversation's window extended, a
	// message.received event appended. ignored counts the messages to a
	// number no company has.
	ReceiveMessages(ctx context.Context, msgs []whatsapp.InboundMessage) (ignored int, err error)
	// ApplyAccountChanges applies the WhatsApp Business Account changes
	// about templates and numbers (waba.ApplyChanges): template status,
	// quality and category, numbers' quality and portfolio tier. ignored
	// counts those about a template or number no company has.
	ApplyAccountChanges(ctx context.Context, changes []whatsapp.AccountChange) (ignored int, err error)
}

// WebhookConfig holds the secrets of the provider's webhooks.
type WebhookConfig struct {
	// AppSecret signs callbacks (X-Hub-Signature-256).
	AppSecret string
	// VerifyToken answers the subscription handshake.
	VerifyToken string
}

// webhookVerify answers the provider's subscription handshake:
// GET ?hub.mode=subscribe&hub.verify_token=...&hub.challenge=... echoes the
// challenge as text when the token matches, else 403.
func (h *handlers) webhookVerify(c *gin.Context) {
	challenge, ok := whatsapp.VerifySubscription(c.Request.URL.Query(), h.webhook.VerifyToken)
	if !ok {
		abortDetail(c, http.StatusForbidden, "Verification failed")
		return
	}
	c.Writer.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.Writer.WriteHeader(http.StatusOK)
	_, _ = c.Writer.WriteString(challenge)
}

// webhookStatuses receives status callbacks, inbound messages and the
// account changes about templates and numbers. A bad signature is 401; a
// body that is not a WhatsApp webhook is acknowledged and ignored (the
// provider would retry an error for days), and so is an element that
// cannot be read, or that names a template or number no company has,
// without holding back the others; a failure to record is 503 so that the
// provider retries (statuses, messages and account changes are all
// recorded idempotently).
func (h *handlers) webhookStatuses(c *gin.Context) {
	body, ok := readBody(c, h.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	if !whatsapp.VerifySignature(h.webhook.AppSecret, body, c.GetHeader(whatsapp.SignatureHeader)) {
		abortDetail(c, http.StatusUnauthorized, "Invalid signature")
		return
	}
	w, err := whatsapp.ParseWebhook(body)
	updates := w.Statuses
	switch {
	case errors.Is(err, whatsapp.ErrNotWhatsAppWebhook):
		writeJSON(c, http.StatusOK, []byte(`{"status":"ignored"}`))
		return
	case err != nil:
		abortDetail(c, http.StatusBadRequest, "Malformed webhook payload")
		return
	}
	if len(updates) > 0 {
		if err := h.statuses.ApplyStatuses(c.Request.Context(), updates); err != nil {
			h.log.Error("record status callbacks", zap.Int("statuses", len(updates)), zap.Error(err))
			abortUnavailable(c)
			return
		}
	}
	received := 0
	if len(w.Messages) > 0 {
		n, err := h.statuses.ReceiveMessages(c.Request.Context(), w.Messages)
		if err != nil {
			h.log.Error("record inbound messages", zap.Int("messages", len(w.Messages)), zap.Error(err))
			abortUnavailable(c)
			return
		}
		received = len(w.Messages) - n
	}
	if w.Malformed > 0 {
		h.log.Warn("webhook: inbound messages that cannot be read were ignored", zap.Int("malformed", w.Malformed))
	}
	changes, ok := h.accountChanges(c, w.Account)
	if !ok {
		return
	}
	ignored := w.Malformed + len(w.Messages) - received + len(w.Account) - changes
	writeJSON(c, http.StatusOK, fmt.Appendf(nil, `{"status":"ok","statuses":%d,"messages":%d,"account_changes":%d,"ignored":%d}`,
		len(updates), received, changes, ignored))
}

// accountChanges records a webhook's account changes and returns how many
// were about a template or number Parley has; a failure answers 503.
func (h *handlers) accountChanges(c *gin.Context, changes []whatsapp.AccountChange) (int, bool) {
	if len(changes) == 0 {
		return 0, true
	}
	n, err := h.statuses.ApplyAccountChanges(c.Request.Context(), changes)
	if err != nil {
		h.log.Error("record account changes", zap.Int("changes", len(changes)), zap.Error(err))
		abortUnavailable(c)
		return 0, false
	}
	return len(changes) - n, true
}
