package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/segments"
	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
	"github.com/parleyhq/parley/services/gateway/internal/validation"
)

// Segments is the segment store (pkg/segments). Each answers
// segments.ErrNotFound for a segment the company does not have, or deleted.
type Segments interface {
	Create(ctx context.Context, companyID int64, name string, members []contacts.Upsert) (segments.Segment, error)
	AddContacts(ctx context.Context, companyID, segmentID int64, members []contacts.Upsert) (segments.Added, error)
	List(ctx context.Context, companyID int64, limit int, cursor string) (segments.Page, error)
	Get(ctx context.Context, companyID, segmentID int64) (segments.Segment, error)
	Rename(ctx context.Context, companyID, segmentID int64, name string) (segments.Segment, error)
	RemoveContacts(ctx context.Context, companyID, segmentID int64, phones []string) (segments.Removed, error)
	Delete(ctx context.Context, companyID, segmentID int64) error
}

// segmentConflict is the 409 of a taken segment name: the ErrorResponse
// shape plus the id of the segment that has the name, so that a client can
// use it without parsing the text.
type segmentConflict struct {
	Detail    string `json:"detail"`
	SegmentID int64  `json:"segment_id"`
}

// segmentInUse is the 409 of a delete refused while sends wait for the
// segment: the ErrorResponse shape plus their batch ids, to cancel.
type segmentInUse struct {
	Detail   string   `json:"detail"`
	BatchIDs []string `json:"batch_ids"`
}

// respond is the flow of the endpoints that answer at once rather than
// queue a send (the segments, a batch's cancel): idempotency, schema
// validation (422), the use case (404, 409, 503), and its answer, which an
// Idempotency-Key replays. PATCH and DELETE are idempotent themselves: an
// Idempotency-Key on them is ignored. An answer nil is no body (204).
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
	var claim *idempotency.Claim
	if route.Method == http.MethodPost {
		var done bool
		if claim, done = h.claimKey(c, route, p.CompanyID, body); done {
			return
		}
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
	var inUse *segments.InUseError
	switch {
	case err == nil && answer == nil:
		c.Status(status)
		c.Writer.WriteHeaderNow()
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
	case errors.As(err, &inUse):
		out, _ := json.Marshal(segmentInUse{Detail: inUse.Error(), BatchIDs: inUse.BatchIDs})
		writeJSON(c, http.StatusConflict, out)
		c.Abort()
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

// segmentID is the segment_id path parameter; an id that is not a positive
// integer is no segment (404).
func segmentID(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("segment_id"), 10, 64)
	if err != nil || id < 1 {
		return 0, segments.ErrNotFound
	}
	return id, nil
}

// listSegments serves GET /api/segments: a page of the company's segments
// with their sizes, by name. Query: limit (1 to 100, 50), cursor (the
// next_cursor of the page before).
func (h *handlers) listSegments(c *gin.Context) {
	q := query{c: c}
	limit := int(q.int("limit", 1, segments.MaxLimit))
	cursor := q.cursor("cursor", "this listing")
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	page, err := h.segments.List(c.Request.Context(), principal(c).CompanyID, limit, cursor)
	switch {
	case errors.Is(err, segments.ErrInvalidCursor):
		q.fail("cursor_invalid", "cursor", "cursor must be the next_cursor of a page of this listing", cursor)
		abortProblems(c, q.problems)
		return
	case err != nil:
		h.log.Error("list segments", zap.Error(err))
		abortUnavailable(c)
		return
	}
	writeValue(c, http.StatusOK, page)
}

// getSegment serves GET /api/segments/{segment_id}: the segment with its
// size.
func (h *handlers) getSegment(c *gin.Context) {
	id, err := segmentID(c)
	var seg segments.Segment
	if err == nil {
		seg, err = h.segments.Get(c.Request.Context(), principal(c).CompanyID, id)
	}
	switch {
	case errors.Is(err, segments.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgSegmentNotFound)
	case err != nil:
		h.log.Error("read segment", zap.Int64("segment_id", id), zap.Error(err))
		abortUnavailable(c)
	default:
		writeValue(c, http.StatusOK, seg)
	}
}

// renameSegment serves PATCH /api/segments/{segment_id}: 200 with the
// renamed segment; 409 when another segment has the name.
func (h *handlers) renameSegment(c *gin.Context) {
	respond(h, c, RouteSegmentRename,
		func(body []byte, contentType string) (validation.SegmentRename, error) {
			return decodeJSON(body, contentType, validation.DecodeSegmentRename)
		},
		func(ctx context.Context, companyID int64, req validation.SegmentRename) (int, any, error) {
			id, err := segmentID(c)
			if err != nil {
				return 0, nil, err
			}
			seg, err := h.segments.Rename(ctx, companyID, id, req.Name)
			return http.StatusOK, seg, err
		})
}

// removeSegmentContacts serves DELETE /api/segments/{segment_id}/contacts:
// 200 with how many contacts left the segment and its size. The contacts
// themselves stay.
func (h *handlers) removeSegmentContacts(c *gin.Context) {
	respond(h, c, RouteSegmentContactsRemove,
		func(body []byte, contentType string) (validation.SegmentRemove, error) {
			return decodeJSON(body, contentType, validation.DecodeSegmentRemove)
		},
		func(ctx context.Context, companyID int64, req validation.SegmentRemove) (int, any, error) {
			id, err := segmentID(c)
			if err != nil {
				return 0, nil, err
			}
			removed, err := h.segments.RemoveContacts(ctx, companyID, id, req.Contacts)
			return http.StatusOK, removed, err
		})
}

// deleteSegment serves DELETE /api/segments/{segment_id}: 204; 409 while
// recorded sends still wait to go to the segment. The body, when any, is a
// JSON object whose members are ignored, as the cancel's.
func (h *handlers) deleteSegment(c *gin.Context) {
	respond(h, c, RouteSegmentDelete, decodeCancel,
		func(ctx context.Context, companyID int64, _ struct{}) (int, any, error) {
			id, err := segmentID(c)
			if err != nil {
				return 0, nil, err
			}
			return http.StatusNoContent, nil, h.segments.Delete(ctx, companyID, id)
		})
}
