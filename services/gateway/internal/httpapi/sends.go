package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
	"github.com/parleyhq/parley/services/gateway/internal/sends"
)

const ctxBatchID = "parley.batch_id"

// Sender is the send use case.
type Sender interface {
	SendCampaign(ctx context.Context, m sends.Meta, req sends.CampaignSend) (sends.Accepted, error)
	TriggerAutomation(ctx context.Context, m sends.Meta, req sends.AutomationTrigger) (sends.Accepted, error)
}

// Idempotency keeps Idempotency-Key records (nil disables the header).
type Idempotency interface {
	Begin(ctx context.Context, companyID int64, route, key, fingerprint string) (idempotency.Decision, idempotency.Record, *idempotency.Claim, error)
	Complete(ctx context.Context, c *idempotency.Claim, batchID string, contacts int) error
	Doubt(ctx context.Context, c *idempotency.Claim, batchID string) error
	Release(ctx context.Context, c *idempotency.Claim) error
}

// readBody reads at most max bytes; a larger body is 413 in the
// ErrorResponse shape.
func readBody(c *gin.Context, max int64) ([]byte, bool) {
	r := http.MaxBytesReader(c.Writer, c.Request.Body, max)
	body, err := io.ReadAll(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			abortDetail(c, http.StatusRequestEntityTooLarge, tooLargeMsg(max))
			return nil, false
		}
		abortDetail(c, http.StatusBadRequest, msgBadBody)
		return nil, false
	}
	return body, true
}

// accept is the flow every send endpoint shares after auth and limits:
// idempotency, schema validation (422), the use case (404, 422, 503), 202.
func accept[T any](h *handlers, c *gin.Context, route Route,
	decode func(body []byte, contentType string) (T, error),
	run func(ctx context.Context, m sends.Meta, req T) (sends.Accepted, error),
) {
	body, ok := readBody(c, h.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	p := principal(c)
	meta := sends.Meta{CompanyID: p.CompanyID, Source: "api:" + route.Name}
	ctx := c.Request.Context()

	var claim *idempotency.Claim
	if raw := c.GetHeader("Idempotency-Key"); raw != "" && h.idem != nil {
		key := idempotency.Normalize(raw)
		if !idempotency.ValidKey(key) {
			abortProblems(c, []problem{{Type: "idempotency_key_invalid", Loc: []any{"header", "Idempotency-Key"},
				Msg: "Idempotency-Key should be 1 to 255 visible ASCII characters", Input: raw}})
			return
		}
		decision, rec, cl, err := h.idem.Begin(ctx, p.CompanyID, route.Name, key, idempotency.Fingerprint(body))
		if err != nil {
			h.log.Error("idempotency store unavailable", zap.Error(err))
			abortUnavailable(c)
			return
		}
		switch decision {
		case idempotency.Replay:
			c.Set(ctxBatchID, rec.BatchID)
			c.Header("Idempotent-Replayed", "true")
			writeJSON(c, http.StatusAccepted, appendAccepted(nil, rec.BatchID, rec.Contacts))
			return
		case idempotency.Busy:
			abortDetail(c, http.StatusConflict, "A request with this Idempotency-Key is still being processed; retry later")
			return
		case idempotency.Mismatch:
			abortProblems(c, []problem{{Type: "idempotency_key_reused", Loc: []any{"header", "Idempotency-Key"},
				Msg: "This Idempotency-Key was already used with a different request body", Input: key}})
			return
		}
		claim = cl
		meta.IdempotencyKey, meta.BatchID = key, cl.BatchID
	}
	// Whatever happens below, a claim must not stay in flight.
	settled := false
	defer func() {
		if claim != nil && !settled {
			h.settle(context.WithoutCancel(ctx), func(ctx context.Context) error { return h.idem.Release(ctx, claim) })
		}
	}()

	req, err := decode(body, c.ContentType())
	if err != nil {
		writeDecodeError(c, err)
		return
	}
	acc, err := run(ctx, meta, req)
	if acc.BatchID != "" {
		c.Set(ctxBatchID, acc.BatchID)
	}
	var cfgErr *sends.ConfigError
	switch {
	case err == nil:
		if claim != nil {
			settled = true
			h.settle(context.WithoutCancel(ctx), func(ctx context.Context) error { return h.idem.Complete(ctx, claim, acc.BatchID, acc.Contacts) })
		}
		writeJSON(c, http.StatusAccepted, appendAccepted(make([]byte, 0, 96), acc.BatchID, acc.Contacts))
	case errors.Is(err, sends.ErrCampaignNotFound), errors.Is(err, sends.ErrAutomationNotFound):
		abortDetail(c, http.StatusNotFound, err.Error())
	case errors.As(err, &cfgErr):
		abortProblems(c, fromSends(cfgErr.Problems))
	case errors.Is(err, sends.ErrUnavailable):
		h.log.Warn("hand-off failed; answered 503", zap.String("route", route.Name), zap.Error(err))
		if claim != nil && acc.BatchID != "" {
			// The stream may hold the batch: a retry publishes the same id.
			settled = true
			h.settle(context.WithoutCancel(ctx), func(ctx context.Context) error { return h.idem.Doubt(ctx, claim, acc.BatchID) })
		}
		abortUnavailable(c)
	default:
		h.log.Error("send failed", zap.String("route", route.Name), zap.Error(err))
		abortDetail(c, http.StatusInternalServerError, msgInternal)
	}
}

// settle finishes an idempotency claim; failing to is logged, not answered:
// the record then expires with its in-flight TTL.
func (h *handlers) settle(ctx context.Context, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.IdempotencyTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		h.log.Warn("idempotency record not updated", zap.Error(err))
	}
}

func (h *handlers) sendCampaign(c *gin.Context) {
	accept(h, c, RouteCampaignSend, decodeCampaignSend, h.sends.SendCampaign)
}

func (h *handlers) triggerAutomation(c *gin.Context) {
	accept(h, c, RouteAutomationSend, decodeAutomationTrigger, h.sends.TriggerAutomation)
}
