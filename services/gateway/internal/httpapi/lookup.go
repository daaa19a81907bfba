package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
)

const msgMessageNotFound = "Message not found"

// query reads a request's query parameters, collecting a 422 item for each
// one that cannot be used, in pydantic's wording.
type query struct {
	c        *gin.Context
	problems []problem
}

func (q *query) fail(typ, name, msg string, input any) {
	q.problems = append(q.problems, problem{Type: typ, Loc: []any{"query", name}, Msg: msg, Input: input})
}

// int reads name as an integer in [lo, hi]; 0 when absent.
func (q *query) int(name string, lo, hi int64) int64 {
	v, ok := q.c.GetQuery(name)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		q.fail("int_parsing", name, "Input should be a valid integer, unable to parse string as an integer", v)
	case n < lo:
		q.fail("greater_than_equal", name, fmt.Sprintf("Input should be greater than or equal to %d", lo), v)
	case n > hi:
		q.fail("less_than_equal", name, fmt.Sprintf("Input should be less than or equal to %d", hi), v)
	default:
		return n
	}
	return 0
}

// time reads name as an RFC 3339 time with an offset; nil when absent.
func (q *query) time(name string) *time.Time {
	v, ok := q.c.GetQuery(name)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if err != nil {
		q.fail("datetime_from_date_parsing", name, "Input should be a valid datetime with a timezone, as 2026-12-01T09:30:00Z", v)
		return nil
	}
	return &t
}

// enum reads name as one of allowed; "" when absent.
func (q *query) enum(name string, allowed []string) string {
	v, ok := q.c.GetQuery(name)
	if !ok {
		return ""
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	q.fail("enum", name, "Input should be "+quotedList(allowed), v)
	return ""
}

// cursor reads name, which must not be empty when given.
func (q *query) cursor(name, what string) string {
	v, ok := q.c.GetQuery(name)
	if ok && v == "" {
		q.fail("cursor_invalid", name, "cursor must be the next_cursor of a page of "+what, v)
	}
	return v
}

// refused answers 422 when err is the record's *InvalidError for a filter
// it could not use (a cursor that no page gave, since until not after
// since), at ["query", <field>], and reports whether it did.
func (q *query) refused(err error) bool {
	var inv *record.InvalidError
	if !errors.As(err, &inv) {
		return false
	}
	p := problem{Type: "value_error", Loc: []any{"query", inv.Field}, Msg: inv.Msg, Input: inv.Input}
	if inv.Field == "cursor" {
		p.Type, p.Msg = "cursor_invalid", "cursor must be the next_cursor of a page of this listing"
	}
	abortProblems(q.c, []problem{p})
	return true
}

// quotedList is pydantic's enum wording: 'a', 'b' or 'c'.
func quotedList(xs []string) string {
	var b strings.Builder
	for i, s := range xs {
		switch {
		case i == len(xs)-1 && i > 0:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	return b.String()
}

func names[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// batchListJSON is a page of GET /api/batches: batches without counts.
type batchListJSON struct {
	Batches []record.Batch `json:"batches"`
	// NextCursor continues after the last batch; null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// listBatches serves GET /api/batches: the company's recorded batches,
// newest first, without their counts (GET /api/batches/{batch_id} has
// them). Query: kind, status, source, campaign_id, automation_id, since and
// until (accepted_at, RFC 3339, since <= accepted_at < until), limit (1 to
// 100, 50) and cursor (the next_cursor of the page before).
func (h *handlers) listBatches(c *gin.Context) {
	q := query{c: c}
	f := record.BatchFilter{
		Kind:         bus.BatchKind(q.enum("kind", names(bus.BatchKinds))),
		Status:       record.BatchState(q.enum("status", names(record.BatchStates))),
		CampaignID:   q.int("campaign_id", 1, 1<<62),
		AutomationID: q.int("automation_id", 1, 1<<62),
		Since:        q.time("since"),
		Until:        q.time("until"),
		Limit:        int(q.int("limit", 1, record.MaxBatchLimit)),
		Cursor:       q.cursor("cursor", "this listing"),
	}
	if v, ok := c.GetQuery("source"); ok {
		if v == "" || len(v) > 200 {
			q.fail("string_too_long", "source", "source should be 1 to 200 characters, as api:campaigns_send or connector:shopify", v)
		}
		f.Source = bus.Source(v)
	}
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	page, err := h.batches.ListBatches(c.Request.Context(), principal(c).CompanyID, f)
	switch {
	case q.refused(err):
		return
	case err != nil:
		h.log.Error("list batches", zap.Error(err))
		abortUnavailable(c)
		return
	}
	writeValue(c, http.StatusOK, batchListJSON{Batches: page.Batches, NextCursor: page.NextCursor})
}

// message serves GET /api/messages/{message_id}: one of the company's
// messages, by the message_id Parley gave it or by the wamid WhatsApp gave
// it (what a status callback or a support ticket quotes), with its batch.
// Another company's message, or none, is 404.
func (h *handlers) message(c *gin.Context) {
	key := c.Param("message_id")
	if key == "" || len(key) > 256 {
		abortDetail(c, http.StatusNotFound, msgMessageNotFound)
		return
	}
	m, err := h.batches.FindMessage(c.Request.Context(), principal(c).CompanyID, key)
	switch {
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgMessageNotFound)
		return
	case err != nil:
		h.log.Error("find message", zap.Error(err))
		abortUnavailable(c)
		return
	}
	if m.Out != nil {
		c.Set(ctxBatchID, m.Out.BatchID)
	}
	writeValue(c, http.StatusOK, m)
}

// writeValue answers status with v in JSON.
func writeValue(c *gin.Context, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		abortDetail(c, http.StatusInternalServerError, msgInternal)
		return
	}
	writeJSON(c, status, body)
}

const msgContactNotFound = "Contact not found"

// contactMessages serves GET /api/contacts/{phone}/messages: the messages
// Parley sent to one of the company's contacts, newest first, from every
// batch, each with its batch. The number is E.164, with or without its +;
// one that is not a number is 422 at ["path", "phone"], one the company
// never sent to and has no contact of 404. Query: limit (1 to 100, 50),
// cursor.
func (h *handlers) contactMessages(c *gin.Context) {
	q := query{c: c}
	raw := c.Param("phone")
	number, ok := phone.Normalize(raw)
	if !ok {
		q.problems = append(q.problems, problem{Type: "string_pattern_mismatch", Loc: []any{"path", "phone"},
			Msg: "String should match pattern '" + phone.Pattern + "'", Input: raw})
	}
	f := record.PhoneFilter{Limit: int(q.int("limit", 1, record.MaxPhoneLimit)), Cursor: q.cursor("cursor", "this listing")}
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	page, err := h.batches.PhoneMessages(c.Request.Context(), principal(c).CompanyID, number, f)
	switch {
	case q.refused(err):
		return
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgContactNotFound)
		return
	case err != nil:
		h.log.Error("list a contact's messages", zap.Error(err))
		abortUnavailable(c)
		return
	}
	writeValue(c, http.StatusOK, page)
}
