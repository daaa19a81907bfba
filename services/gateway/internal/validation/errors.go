package validation

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Errors is a 422 answer: the items pydantic reports, written byte for byte
// as FastAPI's request_validation_exception_handler writes them.
type Errors struct {
	// Items are the entries of "detail", in pydantic's order.
	Items []Item
	body  []byte
}

// Item is one entry of "detail".
type Item struct {
	// Type is pydantic's error type, e.g. "string_pattern_mismatch".
	Type string
	// Loc is "body" followed by field names (string) and list indexes (int).
	Loc []any
	// Msg is pydantic's message.
	Msg string
	// Input is the JSON of the offending value as echoed in the body. It
	// may hold personal data (phone numbers, names): do not log it.
	Input json.RawMessage
	// Ctx is the JSON of the context object, nil when the item has none.
	Ctx json.RawMessage
}

// Body is the exact 422 response body. It is shared: do not modify it.
func (e *Errors) Body() []byte { return e.body }

// MarshalJSON returns Body, so the value can be passed to any JSON writer.
func (e *Errors) MarshalJSON() ([]byte, error) { return e.body, nil }

// Error lists types and locations only: inputs may hold personal data.
func (e *Errors) Error() string {
	var b strings.Builder
	b.WriteString("request validation failed: ")
	for i, it := range e.Items {
		if i == 5 {
			b.WriteString("; ... ")
			b.WriteString(strconv.Itoa(len(e.Items) - i))
			b.WriteString(" more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		for j, l := range it.Loc {
			if j > 0 {
				b.WriteByte('.')
			}
			switch v := l.(type) {
			case string:
				b.WriteString(v)
			case int:
				b.WriteString(strconv.Itoa(v))
			}
		}
		b.WriteString(": ")
		b.WriteString(it.Type)
	}
	return b.String()
}

// locPart is one step of a location: a field or dict key, or a list index.
type locPart struct {
	key   string
	idx   int
	isIdx bool
}

// ctxEntry is one context value, a string or an integer.
type ctxEntry struct {
	key   string
	str   string
	num   int
	isNum bool
}

func ctxStr(k, v string) ctxEntry { return ctxEntry{key: k, str: v} }
func ctxNum(k string, v int) ctxEntry {
	return ctxEntry{key: k, num: v, isNum: true}
}

// inputKind says what an item echoes as its input.
type inputKind uint8

const (
	inNode      inputKind = iota // a value of the document
	inMemberKey                  // the key of a member node
	inNull                       // null
	inEmptyDict                  // {}
	inText                       // a string that is not part of the document
)

// pending is an item recorded during validation, written out at the end
// while the document is still at hand.
type pending struct {
	typ  string
	loc  []locPart
	msg  string
	in   inputKind
	node int32
	text string
	ctx  []ctxEntry
}

// Messages of the error types used here, from pydantic-core.
const (
	typeMissing        = "missing"
	msgMissing         = "Field required"
	typeIntType        = "int_type"
	msgIntType         = "Input should be a valid integer"
	typeIntParsing     = "int_parsing"
	msgIntParsing      = "Input should be a valid integer, unable to parse string as an integer"
	typeIntParsingSize = "int_parsing_size"
	msgIntParsingSize  = "Unable to parse input string as an integer, exceeded maximum size"
	typeIntFromFloat   = "int_from_float"
	msgIntFromFloat    = "Input should be a valid integer, got a number with a fractional part"
	typeFiniteNumber   = "finite_number"
	msgFiniteNumber    = "Input should be a finite number"
	typeBoolType       = "bool_type"
	msgBoolType        = "Input should be a valid boolean"
	typeBoolParsing    = "bool_parsing"
	msgBoolParsing     = "Input should be a valid boolean, unable to interpret input"
	typeStringType     = "string_type"
	msgStringType      = "Input should be a valid string"
	typeStringUnicode  = "string_unicode"
	msgStringUnicode   = "Input should be a valid string, unable to parse raw data as a unicode string"
	typeStringTooLong  = "string_too_long"
	typePattern        = "string_pattern_mismatch"
	typeListType       = "list_type"
	msgListType        = "Input should be a valid list"
	typeTooLong        = "too_long"
	typeDictType       = "dict_type"
	msgDictType        = "Input should be a valid dictionary"
	typeModelAttrs     = "model_attributes_type"
	msgModelAttrs      = "Input should be a valid dictionary or object to extract fields from"
	typeDatetimeDate   = "datetime_from_date_parsing"
	msgDatetimeDate    = "Input should be a valid datetime or date, "
	typeDatetime       = "datetime_parsing"
	msgDatetime        = "Input should be a valid datetime, "
	typeJSONInvalid    = "json_invalid"
	msgJSONInvalid     = "JSON decode error"
)

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// render writes {"detail":[...]} for the pending items.
func (d *decoder) render(items []pending) *Errors {
	e := &Errors{Items: make([]Item, len(items))}
	b := make([]byte, 0, 256)
	type span struct{ in, inEnd, ctx, ctxEnd int }
	spans := make([]span, len(items))
	b = append(b, `{"detail":[`...)
	for i := range items {
		it := &items[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = appendPyString(b, it.typ)
		b = append(b, `,"loc":[`...)
		b = append(b, `"body"`...)
		loc := make([]any, 1, len(it.loc)+1)
		loc[0] = "body"
		for _, l := range it.loc {
			b = append(b, ',')
			if l.isIdx {
				b = strconv.AppendInt(b, int64(l.idx), 10)
				loc = append(loc, l.idx)
			} else {
				b = appendPyString(b, l.key)
				loc = append(loc, l.key)
			}
		}
		b = append(b, `],"msg":`...)
		b = appendPyString(b, it.msg)
		b = append(b, `,"input":`...)
		spans[i].in = len(b)
		switch it.in {
		case inNode:
			b = d.appendValue(b, it.node)
		case inMemberKey:
			b = appendPyString(b, d.str(&d.nodes[it.node]))
		case inNull:
			b = append(b, "null"...)
		case inEmptyDict:
			b = append(b, "{}"...)
		case inText:
			b = appendPyString(b, it.text)
		}
		spans[i].inEnd = len(b)
		if len(it.ctx) > 0 {
			b = append(b, `,"ctx":`...)
			spans[i].ctx = len(b)
			b = append(b, '{')
			for j, c := range it.ctx {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendPyString(b, c.key)
				b = append(b, ':')
				if c.isNum {
					b = strconv.AppendInt(b, int64(c.num), 10)
				} else {
					b = appendPyString(b, c.str)
				}
			}
			b = append(b, '}')
			spans[i].ctxEnd = len(b)
		}
		b = append(b, '}')
		e.Items[i] = Item{Type: it.typ, Loc: loc, Msg: it.msg}
	}
	b = append(b, "]}"...)
	e.body = b
	for i, s := range spans {
		e.Items[i].Input = b[s.in:s.inEnd:s.inEnd]
		if s.ctxEnd > 0 {
			e.Items[i].Ctx = b[s.ctx:s.ctxEnd:s.ctxEnd]
		}
	}
	return e
}

// missingBody is FastAPI's answer to an empty or null body.
func missingBody() *Errors {
	var d decoder
	return d.render([]pending{{typ: typeMissing, msg: msgMissing, in: inNull}})
}

// jsonInvalid is FastAPI's answer to a json.JSONDecodeError.
func jsonInvalid(msg string, pos int) *Errors {
	var d decoder
	return d.render([]pending{{
		typ: typeJSONInvalid,
		loc: []locPart{{idx: pos, isIdx: true}},
		msg: msgJSONInvalid,
		in:  inEmptyDict,
		ctx: []ctxEntry{ctxStr("error", msg)},
	}})
}
