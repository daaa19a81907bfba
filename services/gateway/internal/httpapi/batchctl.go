package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	batchJSON
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
			return http.StatusOK, cancelJSON{Cancelled: res.Cancelled, batchJSON: batchBody(res.Batch)}, err
		})
}

// batchMessages serves GET /api/batches/{batch_id}/messages: a page of the
// batch's messages with their outcomes, in batch order. Query: state
// (repeatable, or a comma list: any of them), limit (1 to 1000, 100), cursor
// (the next_cursor of the page before). 422 for a bad query, checked before
// the batch is looked up; 404 as for GET /api/batches/{batch_id}.
func (h *handlers) batchMessages(c *gin.Context) {
	var f record.Filter
	var problems []problem
	for _, v := range c.QueryArray("state") {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !validMessageState(s) {
				problems = append(problems, problem{Type: "enum", Loc: []any{"query", "state"},
					Msg: "Input should be " + stateList(), Input: s})
				continue
			}
			f.States = append(f.States, s)
		}
	}
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil:
			problems = append(problems, problem{Type: "int_parsing", Loc: []any{"query", "limit"},
				Msg: "Input should be a valid integer, unable to parse string as an integer", Input: v})
		case n < 1:
			problems = append(problems, problem{Type: "greater_than_equal", Loc: []any{"query", "limit"},
				Msg: "Input should be greater than or equal to 1", Input: v})
		case n > record.MaxLimit:
			problems = append(problems, problem{Type: "less_than_equal", Loc: []any{"query", "limit"},
				Msg: fmt.Sprintf("Input should be less than or equal to %d", record.MaxLimit), Input: v})
		default:
			f.Limit = n
		}
	}
	if v, ok := c.GetQuery("cursor"); ok {
		if v == "" {
			problems = append(problems, problem{Type: "cursor_invalid", Loc: []any{"query", "cursor"},
				Msg: "cursor must be the next_cursor of a page of this batch", Input: v})
		}
		f.Cursor = v
	}
	if len(problems) > 0 {
		abortProblems(c, problems)
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
	body, err := json.Marshal(page)
	if err != nil {
		abortDetail(c, http.StatusInternalServerError, msgInternal)
		return
	}
	writeJSON(c, http.StatusOK, body)
}

func validMessageState(s string) bool {
	for _, x := range record.States {
		if string(x) == s {
			return true
		}
	}
	return false
}

// stateList is pydantic's enum wording: 'a', 'b' or 'c'.
func stateList() string {
	var b strings.Builder
	for i, s := range record.States {
		switch {
		case i == len(record.States)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + string(s) + "'")
	}
	return b.String()
}
