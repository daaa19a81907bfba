package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/gateway/internal/validation"
)

// BatchControl cancels a batch and lists its messages (pkg/record), for
// a batch recorded in PostgreSQL or still waiting in the stream. Both
// answer record.ErrNotFound for a batch the company does not have.
type BatchControl interface {
	CancelBatch(ctx context.Context, companyID int64, batchID string) (record.CancelResult, error)
	BatchMessages(ctx context.Context, companyID int64, batchID string, f record.Filter) (record.Page, error)
}

const msgBatchNotFound = "Batch not found"

// errBatchStore is a batch control failure that is not the caller's: the
// record (or the stream) could not be reached. It answers 503.
var errBatchStore = errors.New("batch store unavailable")

// cancelModel is the cancel's body: nothing, or an empty JSON object.
var cancelModel = validation.NewModel[struct{}]()

// decodeCancel accepts an empty body, or a JSON object (its members are
// ignored: the cancel takes no options yet).
func decodeCancel(body []byte, contentType string) (struct{}, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return struct{}{}, nil
	}
	return decodeJSON(body, contentType, func(b []byte) (struct{}, error) { return validation.Decode(cancelModel, b) })
}

// cancelJSON is the answer to a cancel: how many messages it cancelled and
// the batch afterwards.
type cancelJSON struct {
	Cancelled int `json:"cancelled"`
	record.Batch
}

// cancelBatch serves POST /api/batches/{batch_id}/cancel: 200 with how many
// messages this cancel moved to cancelled and the batch afterwards; 0 when
// nothing was left to cancel. An id that is not a batch id, an unknown id
// or another company's batch is 404.
func (h *handlers) cancelBatch(c *gin.Context) {
	raw := c.Param("batch_id")
	respond(h, c, RouteBatchCancel, decodeCancel,
		func(ctx context.Context, companyID int64, _ struct{}) (int, any, error) {
			id, err := uuid.Parse(raw)
			if err != nil {
				return 0, nil, record.ErrNotFound
			}
			res, err := h.control.CancelBatch(ctx, companyID, id.String())
			if err != nil && !errors.Is(err, record.ErrNotFound) {
				h.log.Error("cancel batch", zap.String("batch_id", id.String()), zap.Error(err))
				return 0, nil, fmt.Errorf("%w: %v", errBatchStore, err)
			}
			if err == nil {
				c.Set(ctxBatchID, id.String())
			}
			return http.StatusOK, cancelJSON{Cancelled: res.Cancelled, Batch: res.Batch}, err
		})
}

// batchMessages serves GET /api/batches/{batch_id}/messages: a page of the
// batch's messages with their outcomes, in batch order. Query: state
// (repeatable, or a comma list: any of them), limit (1 to 1000, 100), cursor
// (the next_cursor of the page before). 422 for a bad query, checked before
// the batch is looked up; 404 as for GET /api/batches/{batch_id}.
func (h *handlers) batchMessages(c *gin.Context) {
	q := query{c: c}
	var f record.Filter
	states := names(record.States)
	for _, v := range c.QueryArray("state") {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(states, s) {
				q.fail("enum", "state", "Input should be "+quotedList(states), s)
				continue
			}
			f.States = append(f.States, s)
		}
	}
	f.Limit = int(q.int("limit", 1, record.MaxLimit))
	f.Cursor = q.cursor("cursor", "this batch")
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	id, err := uuid.Parse(c.Param("batch_id"))
	if err != nil {
		abortDetail(c, http.StatusNotFound, msgBatchNotFound)
		return
	}
	page, err := h.control.BatchMessages(c.Request.Context(), principal(c).CompanyID, id.String(), f)
	var inv *record.InvalidError
	switch {
	case errors.As(err, &inv):
		p := problem{Type: "value_error", Loc: []any{"query", inv.Field}, Msg: inv.Msg, Input: inv.Input}
		if inv.Field == "cursor" {
			p.Type, p.Msg = "cursor_invalid", "cursor must be the next_cursor of a page of this batch"
		}
		abortProblems(c, []problem{p})
		return
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgBatchNotFound)
		return
	case err != nil:
		h.log.Error("list batch messages", zap.String("batch_id", id.String()), zap.Error(err))
		abortUnavailable(c)
		return
	}
	c.Set(ctxBatchID, id.String())
	writeValue(c, http.StatusOK, page)
}
