package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/replies"
	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
	"github.com/parleyhq/parley/services/gateway/internal/sends"
	"github.com/parleyhq/parley/services/gateway/internal/validation"
)

// Conversations reads and erases contacts and their conversations
// (pkg/record).
type Conversations interface {
	// Contact is record.Contact.
	Contact(ctx context.Context, companyID int64, phone string) (record.ContactView, error)
	// EraseContact is record.EraseContact.
	EraseContact(ctx context.Context, companyID int64, phone string) (record.Erasure, error)
	// Conversations is record.Conversations.
	Conversations(ctx context.Context, companyID int64, f record.ConversationFilter) (record.ConversationPage, error)
}

// Replier accepts replies (replies.Service).
type Replier interface {
	Send(ctx context.Context, m replies.Meta, req replies.Request) (replies.Accepted, error)
}

// contactNumber reads the {phone} of a contact's path: E.164 with or
// without its +; anything else is 422 at ["path", "phone"].
func contactNumber(c *gin.Context) (string, bool) {
	raw := c.Param("phone")
	number, ok := phone.Normalize(raw)
	if !ok {
		abortProblems(c, []problem{{Type: "string_pattern_mismatch", Loc: []any{"path", "phone"},
			Msg: "String should match pattern '" + phone.Pattern + "'", Input: raw}})
	}
	return number, ok
}

// contact serves GET /api/contacts/{phone}: the company's contact with its
// names, variables, profile name, consent and its history, and the window
// of each number it wrote to. 404 when the company has no such contact.
func (h *handlers) contact(c *gin.Context) {
	number, ok := contactNumber(c)
	if !ok {
		return
	}
	v, err := h.conversations.Contact(c.Request.Context(), principal(c).CompanyID, number)
	switch {
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, msgContactNotFound)
	case err != nil:
		h.log.Error("read a contact", zap.Error(err))
		abortUnavailable(c)
	default:
		writeValue(c, http.StatusOK, v)
	}
}

// eraseContact serves DELETE /api/contacts/{phone}: erases what the
// company holds about the number (record.EraseContact) and answers what
// was erased. Erasing a number the company knows nothing of is a 200 of
// zeros: an erasure is idempotent, and a retry must not fail.
func (h *handlers) eraseContact(c *gin.Context) {
	number, ok := contactNumber(c)
	if !ok {
		return
	}
	e, err := h.conversations.EraseContact(c.Request.Context(), principal(c).CompanyID, number)
	if err != nil {
		h.log.Error("erase a contact", zap.Error(err))
		abortUnavailable(c)
		return
	}
	writeValue(c, http.StatusOK, e)
}

// conversations serves GET /api/conversations: the company's conversations,
// the one whose contact wrote last first, each with its last inbound
// message and window. Query: limit (1 to 100, 50), cursor.
func (h *handlers) conversationList(c *gin.Context) {
	q := query{c: c}
	f := record.ConversationFilter{Limit: int(q.int("limit", 1, record.MaxPhoneLimit)), Cursor: q.cursor("cursor", "this listing")}
	if len(q.problems) > 0 {
		abortProblems(c, q.problems)
		return
	}
	page, err := h.conversations.Conversations(c.Request.Context(), principal(c).CompanyID, f)
	switch {
	case q.refused(err):
	case err != nil:
		h.log.Error("list conversations", zap.Error(err))
		abortUnavailable(c)
	default:
		writeValue(c, http.StatusOK, page)
	}
}

// replyTypes are the types POST /api/messages sends, in the order its 422
// names them.
var replyTypes = []string{"text", "image", "video", "audio", "document", "sticker", "interactive", "reaction", "template"}

// replyJSON is the answer of POST /api/messages.
type replyJSON struct {
	Status    string `json:"status"`
	MessageID int64  `json:"message_id"`
	BatchID   string `json:"batch_id"`
}

// sendMessage serves POST /api/messages: one message to one contact, from
// one of the company's numbers: a session message (text, media,
// interactive, reaction) inside the contact's 24-hour window, or a
// template at any time. 202 with the message's id once the stream has it;
// Location is the message. Idempotency-Key as the sends.
func (h *handlers) sendMessage(c *gin.Context) {
	body, hold, done := h.begin(c, RouteMessageSend)
	if done {
		return
	}
	defer hold.release()
	ctx := c.Request.Context()
	meta := replies.Meta{CompanyID: principal(c).CompanyID, IdempotencyKey: hold.key, BatchID: hold.batchID()}
	req, probs, err := decodeReply(body, c.ContentType())
	switch {
	case err != nil:
		writeDecodeError(c, err)
		return
	case len(probs) > 0:
		abortProblems(c, probs)
		return
	}
	r, err := h.replier.Send(ctx, meta, req)
	if r.BatchID != "" {
		c.Set(ctxBatchID, r.BatchID)
	}
	var closed *replies.WindowClosedError
	var invalid *replies.InvalidError
	switch {
	case err == nil:
		ans, _ := json.Marshal(replyJSON{Status: "accepted", MessageID: r.MessageID, BatchID: r.BatchID})
		hold.settle(func(ctx context.Context, claim *idempotency.Claim) error {
			return h.idem.CompleteAnswer(ctx, claim, http.StatusAccepted, ans)
		})
		c.Writer.Header()["Location"] = []string{"/api/messages/" + strconv.FormatInt(r.MessageID, 10)}
		writeJSON(c, http.StatusAccepted, ans)
	case errors.As(err, &closed):
		abortDetail(c, http.StatusUnprocessableEntity, closed.Error())
	case errors.Is(err, replies.ErrAccountNotFound):
		abortDetail(c, http.StatusNotFound, "Messaging account not found")
	case errors.Is(err, replies.ErrTemplateNotFound):
		abortDetail(c, http.StatusNotFound, "Template not found")
	case errors.As(err, &invalid):
		ps := make([]problem, len(invalid.Problems))
		for i, p := range invalid.Problems {
			ps[i] = problem{Type: p.Type, Loc: p.Loc, Msg: p.Msg, Input: p.Input}
		}
		abortProblems(c, ps)
	case errors.Is(err, sends.ErrUnavailable) || errors.Is(err, replies.ErrPriorUnknown):
		h.log.Warn("publish to the stream failed; answered 503", zap.String("route", RouteMessageSend.Name), zap.Error(err))
		hold.doubt(r.BatchID)
		abortUnavailable(c)
	default:
		h.log.Error("reply failed", zap.Error(err))
		abortDetail(c, http.StatusInternalServerError, msgInternal)
	}
}

// replyBody is the type-specific part of a reply body.
type replyBody struct {
	whatsapp.Session
	Template *struct {
		Name      *string           `json:"name"`
		Language  *string           `json:"language"`
		Variables map[string]string `json:"variables"`
	} `json:"template"`
}

var templateName = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)

// decodeReply validates a reply: the envelope (to, messaging_account_id,
// type) with the schema, then the object of its type with the Cloud API's
// own limits (whatsapp.Session.Validate), each problem a pydantic-shaped
// item at its place in the body.
func decodeReply(body []byte, contentType string) (replies.Request, []problem, error) {
	env, err := decodeJSON(body, contentType, validation.DecodeReply)
	if err != nil {
		return replies.Request{}, nil, err
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	_ = dec.Decode(&raw)             // the schema parsed it already
	to, _ := phone.Normalize(env.To) // the schema held it to the pattern
	req := replies.Request{Phone: to}
	if env.AccountID != nil {
		req.AccountID = *env.AccountID
	}
	if !slices.Contains(replyTypes, env.Type) {
		return req, []problem{{Type: "literal_error", Loc: []any{"body", "type"},
			Msg: whatsapp.LiteralMsg(replyTypes), Input: env.Type}}, nil
	}
	var rb replyBody
	if err := json.Unmarshal(body, &rb); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// The session's fields are promoted: its name is no place in the body.
			loc := append([]any{"body"}, locOf(strings.TrimPrefix(te.Field, "Session."))...)
			typ, msg := expected(te.Type.String())
			return req, []problem{{Type: typ, Loc: loc, Msg: msg, Input: inputAt(raw, loc[1:])}}, nil
		}
		return req, []problem{{Type: "model_attributes_type", Loc: []any{"body"}, Msg: "Input should be a valid dictionary", Input: raw}}, nil
	}
	if env.Type == "template" {
		return req, checkTemplate(&req, rb, raw), nil
	}
	rb.Session.Type = env.Type
	var probs []problem
	for _, fe := range rb.Session.Validate() {
		loc := append([]any{"body"}, locOf(strings.Join(fe.Loc, "."))...)
		probs = append(probs, problem{Type: fe.Type, Loc: loc, Msg: fe.Msg, Input: inputAt(raw, loc[1:])})
	}
	s := rb.Session
	req.Session = &s
	return req, probs, nil
}

func checkTemplate(req *replies.Request, rb replyBody, raw any) []problem {
	t := rb.Template
	switch {
	case t == nil:
		return []problem{{Type: "missing", Loc: []any{"body", "template"}, Msg: "Field required", Input: raw}}
	case t.Name == nil:
		return []problem{{Type: "missing", Loc: []any{"body", "template", "name"}, Msg: "Field required", Input: inputAt(raw, []any{"template"})}}
	case !templateName.MatchString(*t.Name):
		return []problem{{Type: "string_pattern_mismatch", Loc: []any{"body", "template", "name"},
			Msg: "String should match pattern '^[a-z0-9_]{1,512}$'", Input: *t.Name}}
	case t.Language != nil && (*t.Language == "" || len(*t.Language) > 15):
		return []problem{{Type: "string_too_long", Loc: []any{"body", "template", "language"},
			Msg: "String should have 1 to 15 characters", Input: *t.Language}}
	}
	var probs []problem
	for k, v := range t.Variables {
		if k == "" || utf8.RuneCountInString(k) > validation.MaxVarKeyLength || utf8.RuneCountInString(v) > validation.MaxVarValueLength {
			probs = append(probs, problem{Type: "string_too_long", Loc: []any{"body", "template", "variables", k},
				Msg: fmt.Sprintf("Variable names should have 1 to %d characters and values at most %d", validation.MaxVarKeyLength, validation.MaxVarValueLength), Input: v})
		}
	}
	tpl := &replies.Template{Name: *t.Name, Variables: t.Variables}
	if t.Language != nil {
		tpl.Language = *t.Language
	}
	req.Template = tpl
	return probs
}

// locOf splits a dotted path into a loc, indexes as integers.
func locOf(path string) []any {
	if path == "" {
		return nil
	}
	parts := strings.Split(path, ".")
	out := make([]any, len(parts))
	for i, p := range parts {
		if n, err := strconv.Atoi(p); err == nil {
			out[i] = n
		} else {
			out[i] = p
		}
	}
	return out
}

// inputAt is the value of the body at loc (nil when absent), the input a
// pydantic item echoes.
func inputAt(v any, loc []any) any {
	for _, part := range loc {
		switch x := v.(type) {
		case map[string]any:
			k, _ := part.(string)
			v = x[k]
		case []any:
			i, ok := part.(int)
			if !ok || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// expected is pydantic's error type and message for a value that is not
// of the Go type a field wants.
func expected(goType string) (typ, msg string) {
	switch {
	case goType == "string":
		return "string_type", "Input should be a valid string"
	case goType == "bool":
		return "bool_type", "Input should be a valid boolean"
	case strings.HasPrefix(goType, "[]"):
		return "list_type", "Input should be a valid list"
	case strings.HasPrefix(goType, "map["):
		return "dict_type", "Input should be a valid dictionary"
	}
	return "model_attributes_type", "Input should be a valid dictionary or object to extract fields from"
}
