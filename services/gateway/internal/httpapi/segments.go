package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/segments"
)

// Segments is the segment use case (internal/segments).
type Segments interface {
	Create(ctx context.Context, companyID int64, name string, members []contacts.Upsert) (segments.Segment, error)
	AddContacts(ctx context.Context, companyID, segmentID int64, members []contacts.Upsert) (segments.Added, error)
}

// segmentConflict is the 409 of a taken segment name: the ErrorResponse
// shape plus the id of the segment that has the name, so that a client can
// use it without parsing the text.
type segmentConflict struct {
	Detail    string `json:"detail"`
	SegmentID int64  `json:"segment_id"`
}

// respond is the flow of the endpoints that answer at once rather than
// queue a send (the segments, a batch's cancel): idempotency, schema
// validation (422), the use case (404, 409, 503), and its answer, which an
// Idempotency-Key replays.
func respond[T any](h *handlers, c *gin.Context, route Route,
	decode func(body []byte, contentType string) (T, error),
	run func(ctx context.Context, companyID int64, req T) (status int, answer any, err error),
) {
	body, ok := readBody(c, h.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	p := principal(c)
	ctx := c.Request.Context()
	claim, done := h.claimKey(c, route, p.CompanyID, body)
	if done {
		return
	}
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
	status, answer, err := run(ctx, p.CompanyID, req)
	var taken *segments.NameTakenError
	var limit *segments.LimitError
	switch {
	case err == nil:
		out, err := json.Marshal(answer)
		if err != nil {
			abortDetail(c, http.StatusInternalServerError, msgInternal)
			return
		}
		if claim != nil {
			settled = true
			h.settle(context.WithoutCancel(ctx), func(ctx context.Context) error { return h.idem.CompleteAnswer(ctx, claim, status, out) })
		}
		writeJSON(c, status, out)
	case errors.Is(err, segments.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgSegmentNotFound)
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgBatchNotFound)
	case errors.Is(err, errBatchStore):
		c.Header("Retry-After", "1")
		abortDetail(c, http.StatusServiceUnavailable, "Service temporarily unavailable: nothing was changed; retry with backoff")
	case errors.As(err, &taken):
		out, _ := json.Marshal(segmentConflict{Detail: taken.Error(), SegmentID: taken.ID})
		writeJSON(c, http.StatusConflict, out)
		c.Abort()
	case errors.As(err, &limit):
		abortDetail(c, http.StatusConflict, limit.Error())
	default:
		h.log.Error("segment request failed", zap.String("route", route.Name), zap.Error(err))
		abortDetail(c, http.StatusInternalServerError, msgInternal)
	}
}

// createSegment serves POST /api/segments/create: 201 with the segment.
func (h *handlers) createSegment(c *gin.Context) {
	respond(h, c, RouteSegmentCreate, decodeSegmentCreate,
		func(ctx context.Context, companyID int64, req segmentCreate) (int, any, error) {
			seg, err := h.segments.Create(ctx, companyID, req.name, req.members)
			return http.StatusCreated, seg, err
		})
}

// addSegmentContacts serves POST /api/segments/{segment_id}/contacts: 200
// with how many contacts became members and the segment's size.
func (h *handlers) addSegmentContacts(c *gin.Context) {
	segmentID := c.Param("segment_id")
	respond(h, c, RouteSegmentContacts,
		func(body []byte, contentType string) (segmentContacts, error) {
			return decodeSegmentContacts(segmentID, body, contentType)
		},
		func(ctx context.Context, companyID int64, req segmentContacts) (int, any, error) {
			added, err := h.segments.AddContacts(ctx, companyID, req.segmentID, req.members)
			return http.StatusOK, added, err
		})
}
