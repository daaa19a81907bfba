package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

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
	SendBatch(ctx context.Context, m sends.Meta, req sends.BatchSend) (sends.Accepted, error)
	SendViaConnector(ctx context.Context, m sends.Meta, connector string, req sends.ConnectorSend) (sends.Accepted, error)
}

// Idempotency keeps Idempotency-Key records (nil disables the header).
type Idempotency interface {
	Begin(ctx context.Context, companyID int64, route, key, fingerprint string) (idempotency.Decision, idempotency.Record, *idempotency.Claim, error)
	Complete(ctx context.Context, c *idempotency.Claim, batchID string, contacts int) error
	CompleteAnswer(ctx context.Context, c *idempotency.Claim, status int, body []byte) error
	Doubt(ctx context.Context, c *idempotency.Claim, batchID string) error
	Release(ctx context.Context, c *idempotency.Claim) error
}

// readBody reads at most max bytes; a larger body is 413 in the
// ErrorResponse shape.
func readBody(c *gin.Context, max int64) ([]byte, bool) {
	r := http.MaxBytesReader(c.Writer, c.Request.Body, max)
	var body []byte
	var err error
	if n := c.Request.ContentLength; n > 0 && n <= max {
		// The usual case: one allocation of the announced size, no growing.
		body = make([]byte, n)
		_, err = io.ReadFull(r, body)
	} else {
		body, err = io.ReadAll(r)
	}
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

// claimKey handles the Idempotency-Key header before the body is looked
// at: an invalid key (422), a replay of the first answer, a duplicate in
// flight (409) or a key reused with another body (422) are answered here
// (done true). Otherwise claim is the request's hold on the key (nil when
// the header is absent), which the caller must settle.
func (h *handlers) claimKey(c *gin.Context, route Route, companyID int64, body []byte) (claim *idempotency.Claim, done bool) {
	raw := c.GetHeader("Idempotency-Key")
	if raw == "" || h.idem == nil {
		return nil, false
	}
	key := idempotency.Normalize(raw)
	if !idempotency.ValidKey(key) {
		abortProblems(c, []problem{{Type: "idempotency_key_invalid", Loc: []any{"header", "Idempotency-Key"},
			Msg: "Idempotency-Key should be 1 to 255 visible ASCII characters", Input: raw}})
		return nil, true
	}
	// A key is scoped to the endpoint as called: the same key and body sent
	// to another connector or another segment is another request.
	scope := route.Name
	for _, p := range c.Params {
		scope += ":" + p.Value
	}
	decision, rec, cl, err := h.idem.Begin(c.Request.Context(), companyID, scope, key, idempotency.Fingerprint(body))
	if err != nil {
		h.log.Error("idempotency store unavailable", zap.Error(err))
		abortUnavailable(c)
		return nil, true
	}
	switch decision {
	case idempotency.Replay:
		c.Header("Idempotent-Replayed", "true")
		if rec.Status != 0 {
			if loc := replayedLocation(rec.Status, rec.Body); loc != "" {
				c.Writer.Header()["Location"] = []string{loc}
			}
			writeJSON(c, rec.Status, []byte(rec.Body))
			return nil, true
		}
		c.Set(ctxBatchID, rec.BatchID)
		writeAccepted(c, rec.BatchID, rec.Contacts)
		return nil, true
	case idempotency.Busy:
		abortDetail(c, http.StatusConflict, "A request with this Idempotency-Key is still being processed; retry later")
		return nil, true
	case idempotency.Mismatch:
		abortProblems(c, []problem{{Type: "idempotency_key_reused", Loc: []any{"header", "Idempotency-Key"},
			Msg: "This Idempotency-Key was already used with a different request body", Input: key}})
		return nil, true
	}
	return cl, false
}

// keyHold is a request's hold on its Idempotency-Key, from begin: settled
// once with the answer, or released when the request ends without one (a
// claim must not stay in flight). Without the header it does nothing.
type keyHold struct {
	h     *handlers
	ctx   context.Context
	claim *idempotency.Claim
	// key is the normalised header ("" without one).
	key     string
	settled bool
}

// batchID is the batch id the key reserved ("" without a key): a retry of
// a publish that ended in doubt reuses it.
func (k *keyHold) batchID() string {
	if k.claim == nil {
		return ""
	}
	return k.claim.BatchID
}

// settle records the answer with fn (Complete, CompleteAnswer).
func (k *keyHold) settle(fn func(ctx context.Context, c *idempotency.Claim) error) {
	if k.claim == nil || k.settled {
		return
	}
	k.settled = true
	k.h.settle(context.WithoutCancel(k.ctx), func(ctx context.Context) error { return fn(ctx, k.claim) })
}

// doubt records that batchID may be in the stream (its publish was not
// acknowledged): a retry publishes the same id.
func (k *keyHold) doubt(batchID string) {
	if batchID == "" {
		return
	}
	k.settle(func(ctx context.Context, c *idempotency.Claim) error { return k.h.idem.Doubt(ctx, c, batchID) })
}

// release, deferred, releases a claim nothing settled.
func (k *keyHold) release() {
	k.settle(func(ctx context.Context, c *idempotency.Claim) error { return k.h.idem.Release(ctx, c) })
}

// begin reads a sending request's body and takes its Idempotency-Key
// (claimKey); done is true when the request was answered already.
func (h *handlers) begin(c *gin.Context, route Route) (body []byte, hold *keyHold, done bool) {
	body, ok := readBody(c, h.cfg.MaxBodyBytes)
	if !ok {
		return nil, nil, true
	}
	claim, done := h.claimKey(c, route, principal(c).CompanyID, body)
	if done {
		return nil, nil, true
	}
	hold = &keyHold{h: h, ctx: c.Request.Context(), claim: claim}
	if claim != nil {
		hold.key = idempotencyKey(c)
	}
	return body, hold, false
}

// accept is the flow every send endpoint shares after auth and limits:
// idempotency, schema validation (422), the use case (404, 422, 503), 202.
func accept[T any](h *handlers, c *gin.Context, route Route,
	decode func(body []byte, contentType string) (T, error),
	run func(ctx context.Context, m sends.Meta, req T) (sends.Accepted, error),
) {
	body, hold, done := h.begin(c, route)
	if done {
		return
	}
	defer hold.release()
	ctx := c.Request.Context()
	meta := sends.Meta{CompanyID: principal(c).CompanyID, IdempotencyKey: hold.key, BatchID: hold.batchID()}

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
		hold.settle(func(ctx context.Context, claim *idempotency.Claim) error {
			return h.idem.Complete(ctx, claim, acc.BatchID, acc.Contacts)
		})
		writeAccepted(c, acc.BatchID, acc.Contacts)
	case notFoundDetail(err) != "":
		abortDetail(c, http.StatusNotFound, notFoundDetail(err))
	case errors.As(err, &cfgErr):
		abortProblems(c, fromSends(cfgErr.Problems))
	case errors.Is(err, sends.ErrUnavailable):
		h.log.Warn("publish to the stream failed; answered 503", zap.String("route", route.Name), zap.Error(err))
		hold.doubt(acc.BatchID)
		abortUnavailable(c)
	default:
		h.log.Error("send failed", zap.String("route", route.Name), zap.Error(err))
		abortDetail(c, http.StatusInternalServerError, msgInternal)
	}
}

// notFoundDetails are the 404 texts of the use case's errors.
var notFoundDetails = []struct {
	err    error
	detail string
}{
	{sends.ErrCampaignNotFound, "Campaign not found"},
	{sends.ErrAutomationNotFound, "Automation not found"},
	{sends.ErrSegmentNotFound, msgSegmentNotFound},
	{sends.ErrTemplateNotFound, "Template not found"},
	{sends.ErrAccountNotFound, "Messaging account not found"},
	{sends.ErrConnectorNotConnected, "Connector not connected"},
}

// notFoundDetail is the detail of a 404, "" when err is not one. A batch
// message's record is named: "Campaign not found: messages[3].campaign_id".
func notFoundDetail(err error) string {
	for _, nf := range notFoundDetails {
		if errors.Is(err, nf.err) {
			var ref *sends.RefNotFoundError
			if errors.As(err, &ref) {
				return nf.detail + ": " + ref.Where()
			}
			return nf.detail
		}
	}
	return ""
}

// idempotencyKey is the request's normalised Idempotency-Key.
func idempotencyKey(c *gin.Context) string {
	return idempotency.Normalize(c.GetHeader("Idempotency-Key"))
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

func (h *handlers) sendBatch(c *gin.Context) {
	accept(h, c, RouteBatchSend, decodeBatchSend, h.sends.SendBatch)
}

// sendViaConnector serves POST /api/{connector}/send.
func (h *handlers) sendViaConnector(c *gin.Context) {
	name := c.Param("connector")
	accept(h, c, RouteConnectorSend, decodeConnectorSend,
		func(ctx context.Context, m sends.Meta, req sends.ConnectorSend) (sends.Accepted, error) {
			return h.sends.SendViaConnector(ctx, m, name, req)
		})
}

// replayedLocation is the Location of a replayed 202 kept whole (a
// reply's: its message), "" for any other answer.
func replayedLocation(status int, body string) string {
	if status != http.StatusAccepted {
		return ""
	}
	var a struct {
		MessageID int64 `json:"message_id"`
	}
	if json.Unmarshal([]byte(body), &a) != nil || a.MessageID <= 0 {
		return ""
	}
	return "/api/messages/" + strconv.FormatInt(a.MessageID, 10)
}
