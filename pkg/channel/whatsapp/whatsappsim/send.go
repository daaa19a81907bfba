package whatsappsim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// apiError is an answer in the Graph API error shape.
type apiError struct {
	status  int
	code    int
	subcode int
	typ     string
	message string
	details string
}

// The errors the simulator answers, as the real API words them.
func errUnknownObject(id string) *apiError {
	return &apiError{status: 400, code: 100, subcode: 33, typ: "GraphMethodException",
		message: "Unsupported post request. Object with ID '" + id + "' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api"}
}

var (
	errToken = &apiError{status: 401, code: 190, typ: "OAuthException",
		message: "Invalid OAuth access token - Cannot parse access token"}
	errThroughput = &apiError{status: 400, code: 130429, typ: "OAuthException",
		message: "(#130429) Rate limit hit", details: "Cloud API message throughput has been reached."}
	errPairRate = &apiError{status: 400, code: 131056, typ: "OAuthException",
		message: "(#131056) (Business Account, Consumer Account) pair rate limit hit",
		details: "Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time."}
	errStoppedMarketing = &apiError{status: 400, code: 131050, typ: "OAuthException",
		message: "(#131050) Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business.",
		details: "User has stopped marketing messages."}
	errSpamRate = &apiError{status: 400, code: 131048, typ: "OAuthException",
		message: "(#131048) Spam rate limit hit",
		details: "Message failed to send because there are restrictions on how many messages can be sent from this phone number. This may be because too many previous messages were blocked or flagged as spam."}
	errInternal = &apiError{status: 500, code: 131000, typ: "OAuthException",
		message: "(#131000) Something went wrong", details: "Something went wrong"}
	errUnavailable = &apiError{status: 503, code: 131016, typ: "OAuthException",
		message: "(#131016) Service unavailable", details: "A service is temporarily unavailable."}
)

func errParam(message, details string) *apiError {
	return &apiError{status: 400, code: 100, typ: "OAuthException", message: message, details: details}
}

func errRequired(param string) *apiError {
	m := "(#100) The parameter " + param + " is required."
	return errParam(m, m)
}

func errMissingValue(details string) *apiError {
	return &apiError{status: 400, code: 131008, typ: "OAuthException", message: "(#131008) Required parameter is missing", details: details}
}

func errValueNotValid(details string) *apiError {
	return &apiError{status: 400, code: 131009, typ: "OAuthException", message: "(#131009) Parameter value is not valid", details: details}
}

func errParamCount(details string) *apiError {
	return &apiError{status: 400, code: 132000, typ: "OAuthException", message: "(#132000) Number of parameters does not match the expected number of params", details: details}
}

func errNoTemplate(name, lang string) *apiError {
	return &apiError{status: 404, code: 132001, typ: "OAuthException", message: "(#132001) Template name does not exist in the translation",
		details: "template name (" + name + ") does not exist in " + lang}
}

func errFormat(details string) *apiError {
	return &apiError{status: 400, code: 132012, typ: "OAuthException", message: "(#132012) Parameter format does not match format in the created template", details: details}
}

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Message   string         `json:"message"`
	Type      string         `json:"type"`
	Code      int            `json:"code"`
	Subcode   int            `json:"error_subcode,omitempty"`
	ErrorData *wireErrorData `json:"error_data,omitempty"`
	TraceID   string         `json:"fbtrace_id"`
}

type wireErrorData struct {
	MessagingProduct string `json:"messaging_product"`
	Details          string `json:"details"`
}

// fail answers a send with an error, counted in the statistics.
func (s *Sim) fail(w http.ResponseWriter, e *apiError) {
	s.counts.error(e.code)
	s.m.errorCode(e.code)
	s.writeError(w, e)
}

// writeError answers any Graph API request with an error.
func (s *Sim) writeError(w http.ResponseWriter, e *apiError) {
	body := wireErrorBody{Message: e.message, Type: e.typ, Code: e.code, Subcode: e.subcode, TraceID: s.ids.trace()}
	if e.details != "" {
		body.ErrorData = &wireErrorData{MessagingProduct: "whatsapp", Details: e.details}
	}
	b, _ := json.Marshal(wireError{Error: body})
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `OAuth "Facebook Platform" "invalid_token" "`+e.message+`"`)
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// handleSend is POST /{version}/{phone_number_id}/messages.
func (s *Sim) handleSend(w http.ResponseWriter, r *http.Request) {
	s.counts.requests.Add(1)
	s.m.requests.Inc()

	f := s.faults.Load()
	if f.Latency > 0 || f.Jitter > 0 {
		d := f.Latency
		if f.Jitter > 0 {
			d += rand.N(f.Jitter)
		}
		if !s.sleep(r.Context(), d) {
			return
		}
	}

	if v := r.PathValue("version"); len(v) < 2 || v[0] != 'v' {
		s.fail(w, errParam("(#100) Unknown path components: /"+v, "the path is /{version}/{phone_number_id}/messages, version like v21.0"))
		return
	}
	pnid := r.PathValue("phone_number_id")
	acc := (*s.accounts.Load())[pnid]
	if acc == nil {
		s.fail(w, errUnknownObject(pnid))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(acc.bearer)) != 1 {
		s.fail(w, errToken)
		return
	}
	if f.TimeoutRate > 0 && rand.Float64() < f.TimeoutRate {
		s.hang(r)
		return
	}
	if f.ErrorRate > 0 && rand.Float64() < f.ErrorRate {
		if rand.IntN(2) == 0 {
			s.fail(w, errInternal)
		} else {
			s.fail(w, errUnavailable)
		}
		return
	}

	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, maxBody+1)); err != nil {
		return // the client went away
	}
	if buf.Len() > maxBody {
		s.fail(w, errParam("(#100) Invalid parameter", "Request body is larger than "+strconv.Itoa(maxBody)+" bytes"))
		return
	}
	var body sendBody
	if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
		s.fail(w, decodeError(err))
		return
	}
	now := time.Now()
	digits, apiErr := validateEnvelope(&body)
	var tplMsg whatsapp.TemplateMessage
	var category string
	session := body.Type != whatsapp.MessageTypeTemplate
	if apiErr == nil {
		if session {
			if errs := body.Session.Validate(); len(errs) > 0 {
				apiErr = sessionError(errs[0])
			}
		} else {
			tplMsg = body.templateMessage()
			apiErr = validateTemplate(&tplMsg)
			if apiErr == nil {
				category, apiErr = s.checkTemplate(acc, &tplMsg, now)
			}
		}
	}
	if apiErr != nil {
		s.fail(w, apiErr)
		return
	}

	if !acc.bucket.take(now.UnixNano()) {
		s.fail(w, errThroughput)
		return
	}
	// 131050 is about marketing: a user who stopped it still gets answers.
	if !session && f.stoppedMarketing(digits) {
		s.fail(w, errStoppedMarketing)
		return
	}
	if !session && category == whatsapp.CategoryMarketing && f.spamLimited(pnid) {
		s.fail(w, errSpamRate)
		return
	}
	rules := s.rules.Load()
	if rules.PairRateInterval > 0 && !s.pairs.allow(pnid+":"+digits, now.UnixNano(), int64(rules.PairRateInterval)) {
		s.fail(w, errPairRate)
		return
	}
	failCode := 0
	if session {
		if rules.EnforceServiceWindow && !s.windows.open(pnid, digits, now, rules.ServiceWindow) {
			s.counts.windowClosed.Add(1)
			if rules.ServiceWindowError == WindowErrorSync {
				s.fail(w, errReengagement)
				return
			}
			failCode = codeReengagement
		}
	}
	undeliverable := f.undeliverable(digits)
	if undeliverable && failCode == 0 {
		failCode = 131026
	}
	if !session && failCode == 0 {
		// A message that is not delivered reaches no one: 131049 is decided
		// before the messaging limit counts the user.
		if category == whatsapp.CategoryMarketing && rules.MarketingLimitShare > 0 &&
			s.marketing.decline(digits, now.UnixNano(), rules.scaled(MarketingLimitDay), rules.MarketingLimitShare) {
			s.counts.marketingDeclined.Add(1)
			failCode = codeMarketingLimit
		} else if limit := s.limits.limit(acc.portfolio); limit > 0 && !s.windows.open(pnid, digits, now, rules.ServiceWindow) &&
			!s.limits.reachUser(acc.portfolio, digits, now.UnixNano(), rules.scaled(MessagingLimitWindow), limit) {
			s.counts.limitRefused.Add(1)
			if rules.MessagingLimitError == MessagingLimitSync {
				s.fail(w, errMessagingLimit(rules.MessagingLimitCode))
				return
			}
			failCode = rules.MessagingLimitCode
		}
	}

	id := s.ids.next()
	rec := Received{
		ID:            id,
		PhoneNumberID: pnid,
		To:            digits,
		Type:          body.Type,
		Undeliverable: undeliverable,
		FailedWith:    failCode,
		ReceivedAt:    now,
	}
	if session {
		sess := body.Session
		rec.Session = &sess
		s.counts.sessions.Add(1)
	} else {
		rec.Template, rec.Language, rec.Components = tplMsg.Template.Name, tplMsg.Template.Language.Code, tplMsg.Template.Components
	}
	s.rec.record(rec)
	s.m.sends.Inc()
	s.cb.accepted(acc, id, digits, failCode, session, category, now)

	out := make([]byte, 0, 160+len(id))
	out = append(out, `{"messaging_product":"whatsapp","contacts":[{"input":`...)
	out = strconv.AppendQuote(out, body.To)
	out = append(out, `,"wa_id":"`...)
	out = append(out, digits...)
	out = append(out, `"}],"messages":[{"id":"`...)
	out = append(out, id...)
	out = append(out, `","message_status":"accepted"}]}`...)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(out)
}

// sendBody is any send: the envelope, a template, or a session message's
// type and object.
type sendBody struct {
	MessagingProduct string                    `json:"messaging_product"`
	RecipientType    string                    `json:"recipient_type"`
	To               string                    `json:"to"`
	Template         *whatsapp.TemplatePayload `json:"template"`
	whatsapp.Session
}

func (b *sendBody) templateMessage() whatsapp.TemplateMessage {
	m := whatsapp.TemplateMessage{MessagingProduct: b.MessagingProduct, RecipientType: b.RecipientType, To: b.To, Type: b.Type}
	if b.Template != nil {
		m.Template = *b.Template
	}
	return m
}

// hang holds the request without an answer until the client gives up, the
// simulator closes or HangMax passes, then drops the connection: the client
// sees a timeout or a broken connection, never an answer.
func (s *Sim) hang(r *http.Request) {
	s.counts.hung.Add(1)
	s.m.hung.Inc()
	t := time.NewTimer(s.cfg.HangMax)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-s.closing:
	case <-t.C:
	}
	panic(http.ErrAbortHandler)
}

// decodeError words a body that does not decode as the API does.
func decodeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return errParam("(#100) Param "+field+" must be "+jsonKind(te.Type.Kind().String()), "Param "+field+" has the wrong type: "+te.Value)
	}
	return errParam("(#100) Invalid parameter", "Request body is not valid JSON")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "ptr", "map":
		return "an object"
	}
	return "a " + goKind
}

// validateEnvelope checks what every send has, as the Cloud API does, and
// returns the recipient's digits.
func validateEnvelope(m *sendBody) (string, *apiError) {
	switch {
	case m.MessagingProduct == "":
		return "", errRequired("messaging_product")
	case m.MessagingProduct != whatsapp.MessagingProduct:
		return "", errParam("(#100) Param messaging_product must be one of {WHATSAPP} - got \""+m.MessagingProduct+"\".", "messaging_product must be whatsapp")
	case m.RecipientType != "" && m.RecipientType != whatsapp.RecipientIndividual:
		return "", errParam("(#100) Param recipient_type must be one of {INDIVIDUAL, GROUP}", "recipient_type must be individual")
	case m.To == "":
		return "", errRequired("to")
	}
	digits, ok := recipientDigits(m.To)
	if !ok {
		return "", errParam("(#100) Invalid parameter", "Param to must be a phone number: digits with an optional leading +, 7 to 15 digits")
	}
	if m.Type == "" {
		return "", errRequired("type")
	}
	return digits, nil
}

// sessionError is the Cloud API's answer to the first problem of a session
// message: 131008 for a required value that is missing, 100 for a value
// of the wrong kind (an unknown type, a field that does not belong),
// 131009 for a value out of its limits.
func sessionError(e whatsapp.FieldError) *apiError {
	details := "Param " + metaParam(e.Loc) + ": " + e.Msg
	switch {
	case e.Type == "missing", e.Type == "string_too_short", e.Type == "too_short",
		e.Type == "url_parsing" && strings.HasSuffix(e.Msg, "input is empty"):
		return errMissingValue(details)
	case e.Type == "literal_error", e.Type == "extra_forbidden", e.Type == "string_unicode":
		return errParam("(#100) Invalid parameter", details)
	}
	return errValueNotValid(details)
}

// metaParam writes a path as the Graph API names parameters:
// interactive['action']['buttons'][3].
func metaParam(loc []string) string {
	if len(loc) == 0 {
		return "body"
	}
	var b strings.Builder
	b.WriteString(loc[0])
	for _, p := range loc[1:] {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			b.WriteString("[" + p + "]")
		} else {
			b.WriteString("['" + p + "']")
		}
	}
	return b.String()
}

// validateTemplate checks a template send's template as the Cloud API does.
func validateTemplate(m *whatsapp.TemplateMessage) *apiError {
	switch {
	case m.Template.Name == "":
		return errRequired("template['name']")
	case m.Template.Language.Code == "":
		return errRequired("template['language']['code']")
	}
	for i, c := range m.Template.Components {
		where := "components[" + strconv.Itoa(i) + "]"
		switch c.Type {
		case "header", "body":
			if c.SubType != "" || c.Index != "" {
				return errParam("(#100) Invalid parameter", where+": sub_type and index belong to buttons")
			}
		case "button":
			if c.SubType == "" {
				return errRequired("template['" + where + "']['sub_type']")
			}
			if c.SubType != "url" {
				return errParam("(#100) Invalid parameter", where+": the simulator serves url buttons only")
			}
			if len(c.Index) != 1 || c.Index[0] < '0' || c.Index[0] > '9' {
				return errParam("(#100) Invalid parameter", where+": index must be a digit from 0 to 9")
			}
			if len(c.Parameters) != 1 || c.Parameters[0].Type != "text" {
				return errMissingValue(where + ": a url button takes one text parameter")
			}
		case "":
			return errRequired("template['" + where + "']['type']")
		default:
			return errParam("(#100) Invalid parameter", where+": type must be header, body or button")
		}
		if len(c.Parameters) == 0 {
			return errMissingValue(where + ": parameters is empty")
		}
		for _, p := range c.Parameters {
			switch p.Type {
			case "text":
				if p.Text == "" {
					return errMissingValue("Parameter of type text is missing text value")
				}
			case "image", "video":
				link := p.Image
				if p.Type == "video" {
					link = p.Video
				}
				if link == nil || link.Link == "" {
					return errMissingValue("Parameter of type " + p.Type + " is missing " + p.Type + " link")
				}
				if !strings.HasPrefix(link.Link, "https://") && !strings.HasPrefix(link.Link, "http://") {
					return errValueNotValid("Parameter of type " + p.Type + " has an invalid link: want an http(s) URL")
				}
				if c.Type != "header" {
					return errValueNotValid("media parameters belong to the header")
				}
			case "":
				return errRequired("template['" + where + "']['parameters'][]['type']")
			default:
				return errParam("(#100) Invalid parameter", where+": parameter type must be text, image or video")
			}
		}
	}
	return nil
}

// recipientDigits accepts what the real API takes for a send: an
// international number, digits with an optional leading '+'.
func recipientDigits(to string) (string, bool) {
	d := strings.TrimPrefix(to, "+")
	if len(d) < 7 || len(d) > 15 || d[0] == '0' {
		return "", false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return "", false
		}
	}
	return d, true
}
