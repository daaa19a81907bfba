package validation

import (
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"
)

// Type validates one value of the document into a V, the way a pydantic
// field type does in lax python mode, recording pydantic's errors.
type Type[V any] interface {
	decode(d *decoder, n int32) (V, bool)
}

// Field is one field of a Model, in declaration order (errors come in that
// order).
type Field[T any] struct {
	name     string
	required bool
	decode   func(d *decoder, n int32, dst *T) bool
}

// Required declares a field without default: absent, it is pydantic's
// "missing" error.
func Required[T, V any](name string, typ Type[V], set func(*T, V)) Field[T] {
	return Field[T]{name: name, required: true, decode: fieldDecoder(typ, set)}
}

// Optional declares a field with a default: absent, set is not called and
// the field keeps its zero value. A null is validated like any other value
// (wrap the type in OrNull to accept it).
func Optional[T, V any](name string, typ Type[V], set func(*T, V)) Field[T] {
	return Field[T]{name: name, decode: fieldDecoder(typ, set)}
}

func fieldDecoder[T, V any](typ Type[V], set func(*T, V)) func(*decoder, int32, *T) bool {
	return func(d *decoder, n int32, dst *T) bool {
		v, ok := typ.decode(d, n)
		if ok {
			set(dst, v)
		}
		return ok
	}
}

// Model is a pydantic BaseModel with default config: fields in order, extra
// keys ignored, validated from a dict (anything else is
// model_attributes_type, as with from_attributes=True).
type Model[T any] struct {
	fields []Field[T]
}

// NewModel declares a model.
func NewModel[T any](fields ...Field[T]) *Model[T] {
	return &Model[T]{fields: fields}
}

func (m *Model[T]) decode(d *decoder, n int32) (T, bool) {
	var out T
	ok := m.decodeInto(d, n, &out)
	return out, ok
}

// decodeInto fills dst in place, which spares a copy (and a heap object per
// list element).
func (m *Model[T]) decodeInto(d *decoder, n int32, dst *T) bool {
	nd := &d.nodes[n]
	if nd.kind != kObject {
		d.fail(typeModelAttrs, msgModelAttrs, n)
		return false
	}
	ok := true
	for i := range m.fields {
		f := &m.fields[i]
		d.loc = append(d.loc, locPart{key: f.name})
		if v := d.lookup(nd, f.name); v >= 0 {
			if !f.decode(d, v, dst) {
				ok = false
			}
		} else if f.required {
			d.fail(typeMissing, msgMissing, n)
			ok = false
		}
		d.loc = d.loc[:len(d.loc)-1]
	}
	return ok
}

// intoType is implemented by types that can decode in place.
type intoType[V any] interface {
	decodeInto(d *decoder, n int32, dst *V) bool
}

// Integer is a validated Python int. Python ints have no size limit: Big is
// set for values outside int64, and Value is then 0.
type Integer struct {
	Value int64
	Big   bool
}

type intType struct{}

// Int is pydantic's int: JSON integers, integral floats within int64,
// booleans, and strings that int() would take (see strAsInt).
func Int() Type[Integer] { return intType{} }

func (intType) decode(d *decoder, n int32) (Integer, bool) {
	nd := &d.nodes[n]
	switch nd.kind {
	case kInt:
		v, ok := parseIntLiteral(d.raw(nd))
		return Integer{Value: v, Big: !ok}, true
	case kTrue:
		return Integer{Value: 1}, true
	case kFalse:
		return Integer{}, true
	case kFloat, kNaN, kInf, kNegInf:
		v, errType := floatAsInt(d.float(nd))
		if errType != "" {
			d.fail(errType, intMessage(errType), n)
			return Integer{}, false
		}
		return Integer{Value: v}, true
	case kString:
		if nd.flags&fSurrogate != 0 {
			d.fail(typeStringUnicode, msgStringUnicode, n)
			return Integer{}, false
		}
		v, big, errType := strAsInt(d.str(nd))
		if errType != "" {
			d.fail(errType, intMessage(errType), n)
			return Integer{}, false
		}
		return Integer{Value: v, Big: big}, true
	}
	d.fail(typeIntType, msgIntType, n)
	return Integer{}, false
}

func intMessage(errType string) string {
	switch errType {
	case typeFiniteNumber:
		return msgFiniteNumber
	case typeIntFromFloat:
		return msgIntFromFloat
	case typeIntParsingSize:
		return msgIntParsingSize
	}
	return msgIntParsing
}

type boolType struct{}

// Bool is pydantic's bool: booleans, the integers 0 and 1 (also as
// integral floats), and the strings str_as_bool knows.
func Bool() Type[bool] { return boolType{} }

func (boolType) decode(d *decoder, n int32) (bool, bool) {
	nd := &d.nodes[n]
	var i int64
	switch nd.kind {
	case kTrue:
		return true, true
	case kFalse:
		return false, true
	case kInt:
		v, ok := parseIntLiteral(d.raw(nd))
		if !ok {
			d.fail(typeBoolType, msgBoolType, n)
			return false, false
		}
		i = v
	case kFloat:
		v, errType := floatAsInt(d.float(nd))
		if errType != "" {
			d.fail(typeBoolType, msgBoolType, n)
			return false, false
		}
		i = v
	case kString:
		if nd.flags&fSurrogate != 0 {
			d.fail(typeStringUnicode, msgStringUnicode, n)
			return false, false
		}
		b, ok := strAsBool(d.str(nd))
		if !ok {
			d.fail(typeBoolParsing, msgBoolParsing, n)
		}
		return b, ok
	default:
		d.fail(typeBoolType, msgBoolType, n)
		return false, false
	}
	if i != 0 && i != 1 {
		d.fail(typeBoolParsing, msgBoolParsing, n)
		return false, false
	}
	return i == 1, true
}

// Pattern is a string pattern: Text is what pydantic prints, Match must
// implement it with the semantics of pydantic's rust-regex (Unicode \s,
// \S; $ only at the very end).
type Pattern struct {
	Text  string
	Match func(string) bool
}

// StringRules are pydantic's StringConstraints used here.
type StringRules struct {
	// MaxLength counts characters (code points); 0 means no limit.
	MaxLength int
	// Pattern, if set, must match the whole string.
	Pattern *Pattern
}

type strType struct{ rules StringRules }

// String is pydantic's str: only JSON strings (no number coercion), checked
// against rules.
func String(rules StringRules) Type[string] { return strType{rules} }

func (t strType) decode(d *decoder, n int32) (string, bool) {
	nd := &d.nodes[n]
	if nd.kind != kString {
		d.fail(typeStringType, msgStringType, n)
		return "", false
	}
	s := d.str(nd)
	return s, d.checkString(s, nd.flags, t.rules, inNode, n)
}

// checkString applies str validation to a string of the document: lone
// surrogates (a Python str that is not valid Unicode), then length, then
// pattern; the first failure is the only error.
func (d *decoder) checkString(s string, flags uint8, r StringRules, in inputKind, n int32) bool {
	if flags&fSurrogate != 0 {
		d.failInput(typeStringUnicode, msgStringUnicode, in, n)
		return false
	}
	if r.MaxLength > 0 && len(s) > r.MaxLength && utf8.RuneCountInString(s) > r.MaxLength {
		msg := fmt.Sprintf("String should have at most %d character%s", r.MaxLength, plural(r.MaxLength))
		d.failInput(typeStringTooLong, msg, in, n, ctxNum("max_length", r.MaxLength))
		return false
	}
	if r.Pattern != nil && !r.Pattern.Match(s) {
		d.failInput(typePattern, "String should match pattern '"+r.Pattern.Text+"'", in, n, ctxStr("pattern", r.Pattern.Text))
		return false
	}
	return true
}

// Null is the result of OrNull: Valid is false for null (or an absent
// optional field).
type Null[V any] struct {
	V     V
	Valid bool
}

type nullType[V any] struct{ inner Type[V] }

// OrNull is Optional[X] in pydantic: null, or a valid X.
func OrNull[V any](inner Type[V]) Type[Null[V]] { return nullType[V]{inner} }

func (t nullType[V]) decode(d *decoder, n int32) (Null[V], bool) {
	if d.nodes[n].kind == kNull {
		return Null[V]{}, true
	}
	v, ok := t.inner.decode(d, n)
	return Null[V]{V: v, Valid: ok}, ok
}

type listType[V any] struct {
	elem     Type[V]
	into     intoType[V]
	maxItems int
}

// ListOf is list[X] with an optional max_length (0 means no limit). A list
// longer than maxItems is one too_long error; its items are not checked.
func ListOf[V any](elem Type[V], maxItems int) Type[[]V] {
	t := listType[V]{elem: elem, maxItems: maxItems}
	t.into, _ = elem.(intoType[V])
	return t
}

func (t listType[V]) decode(d *decoder, n int32) ([]V, bool) {
	nd := &d.nodes[n]
	if nd.kind != kArray {
		d.fail(typeListType, msgListType, n)
		return nil, false
	}
	if t.maxItems > 0 && int(nd.n) > t.maxItems {
		msg := fmt.Sprintf("List should have at most %d item%s after validation, not %d", t.maxItems, plural(t.maxItems), nd.n)
		d.fail(typeTooLong, msg, n,
			ctxStr("field_type", "List"), ctxNum("max_length", t.maxItems), ctxNum("actual_length", int(nd.n)))
		return nil, false
	}
	out := make([]V, nd.n)
	ok := true
	i := 0
	for c := nd.first; c >= 0; c = d.nodes[c].next {
		d.loc = append(d.loc, locPart{idx: i, isIdx: true})
		var vok bool
		if t.into != nil {
			vok = t.into.decodeInto(d, c, &out[i])
		} else {
			out[i], vok = t.elem.decode(d, c)
		}
		d.loc = d.loc[:len(d.loc)-1]
		ok = ok && vok
		i++
	}
	return out, ok
}

// Pair is one entry of a StringMap.
type Pair struct {
	Key, Value string
}

// Pairs are the entries of a StringMap in the order of the document, each
// key once.
type Pairs []Pair

// Get returns the value of key.
func (ps Pairs) Get(key string) (string, bool) {
	for _, p := range ps {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Map returns the entries as a map.
func (ps Pairs) Map() map[string]string {
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Key] = p.Value
	}
	return m
}

type stringMapType struct {
	key   StringRules
	value strType
}

// StringMap is dict[str, str] with constraints on keys and values. The
// result keeps the document's key order; a repeated key appears once, at
// its first position, with its last value.
func StringMap(key, value StringRules) Type[Pairs] {
	return stringMapType{key: key, value: strType{value}}
}

func (t stringMapType) decode(d *decoder, n int32) (Pairs, bool) {
	nd := &d.nodes[n]
	if nd.kind != kObject {
		d.fail(typeDictType, msgDictType, n)
		return nil, false
	}
	out := make(Pairs, 0, nd.n)
	ok := true
	for m := nd.first; m >= 0; m = d.nodes[m].next {
		mn := &d.nodes[m]
		k := d.str(mn)
		locKey := k
		if mn.flags&fSurrogate != 0 {
			locKey = lossyString(k)
		}
		d.loc = append(d.loc, locPart{key: locKey}, locPart{key: "[key]"})
		kok := d.checkString(k, mn.flags, t.key, inMemberKey, m)
		d.loc = d.loc[:len(d.loc)-1]
		v, vok := t.value.decode(d, mn.first)
		d.loc = d.loc[:len(d.loc)-1]
		if kok && vok {
			out = append(out, Pair{Key: k, Value: v})
		} else {
			ok = false
		}
	}
	return out, ok
}

// lossyString is how pydantic turns a str holding lone surrogates into a
// location: encoded with surrogatepass, then decoded lossily, so each
// surrogate becomes three U+FFFD.
func lossyString(s string) string {
	out := make([]byte, 0, len(s)+6)
	for i := 0; i < len(s); {
		if isSurrogateSeqAt(s, i) {
			out = append(out, "\uFFFD\uFFFD\uFFFD"...)
			i += 3
			continue
		}
		out = append(out, s[i])
		i++
	}
	return string(out)
}

type dateTimeType struct{ maxLength int }

// DateTimeString is a str of at most maxLength characters that must then
// parse as pydantic's lax datetime does; the result is in UTC, a value
// without offset being taken as UTC.
func DateTimeString(maxLength int) Type[time.Time] { return dateTimeType{maxLength} }

func (t dateTimeType) decode(d *decoder, n int32) (time.Time, bool) {
	nd := &d.nodes[n]
	if nd.kind != kString {
		d.fail(typeStringType, msgStringType, n)
		return time.Time{}, false
	}
	s := d.str(nd)
	if !d.checkString(s, nd.flags, StringRules{MaxLength: t.maxLength}, inNode, n) {
		return time.Time{}, false
	}
	v, errType, errMsg := parseDatetime(s)
	if errType != "" {
		prefix := msgDatetimeDate
		if errType == typeDatetime {
			prefix = msgDatetime
		}
		d.fail(errType, prefix+errMsg, n, ctxStr("error", errMsg))
		return time.Time{}, false
	}
	return v, true
}

// decoder holds one request's document and the errors found in it.
type decoder struct {
	parser
	strs  string // the arena as a string, once parsing is done
	loc   []locPart
	items []pending
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// release returns the decoder to the pool, dropping what belongs to the
// request and buffers grown by an unusually large one.
func (d *decoder) release() {
	d.text, d.strs = "", ""
	clear(d.loc[:cap(d.loc)]) // dict keys are slices of the request text
	d.loc = d.loc[:0]
	d.items = nil
	if cap(d.nodes) > 1<<16 {
		d.nodes = nil
	}
	if cap(d.arena) > 1<<20 {
		d.arena = nil
	}
	decoders.Put(d)
}

func (d *decoder) raw(nd *node) string { return d.text[nd.start:nd.end] }

func (d *decoder) str(nd *node) string {
	if nd.flags&fArena != 0 {
		return d.strs[nd.start:nd.end]
	}
	return d.text[nd.start:nd.end]
}

// float is the Python float of a float node or of a named constant.
func (d *decoder) float(nd *node) float64 {
	switch nd.kind {
	case kNaN:
		return math.NaN()
	case kInf:
		return math.Inf(1)
	case kNegInf:
		return math.Inf(-1)
	}
	return parseFloatLiteral(d.raw(nd))
}

// lookup finds the value of key in an object node, or -1.
func (d *decoder) lookup(obj *node, key string) int32 {
	for m := obj.first; m >= 0; m = d.nodes[m].next {
		if d.str(&d.nodes[m]) == key {
			return d.nodes[m].first
		}
	}
	return -1
}

func (d *decoder) fail(typ, msg string, n int32, ctx ...ctxEntry) {
	d.failInput(typ, msg, inNode, n, ctx...)
}

func (d *decoder) failInput(typ, msg string, in inputKind, n int32, ctx ...ctxEntry) {
	d.items = append(d.items, pending{
		typ:  typ,
		loc:  append([]locPart(nil), d.loc...),
		msg:  msg,
		in:   in,
		node: n,
		ctx:  ctx,
	})
}

// Decode validates a JSON request body against m: FastAPI's pipeline for a
// single body parameter (json.loads, then TypeAdapter.validate_python with
// from_attributes=True). The error is an *Errors for a 422, or
// ErrBodyUnparseable (possibly ErrBodyNotUTF8) for FastAPI's 400.
func Decode[T any](m *Model[T], body []byte) (T, error) {
	var zero T
	if len(body) == 0 {
		return zero, missingBody()
	}
	text, surrogates, err := decodeText(body)
	if err != nil {
		return zero, err
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	// The copy is the one allocation of the text: decoded strings are
	// slices of it and may outlive the request buffer.
	d.reset(string(text), surrogates)
	root := d.document()
	switch {
	case d.fatal != nil:
		return zero, d.fatal
	case d.jerr != nil:
		return zero, jsonInvalid(d.jerr.msg, charIndex(d.text, d.jerr.off))
	}
	if len(d.arena) > 0 {
		d.strs = string(d.arena)
	}
	if d.nodes[root].kind == kNull {
		return zero, missingBody()
	}
	var v T
	if !m.decodeInto(d, root, &v) {
		return zero, d.render(d.items)
	}
	return v, nil
}

// NonJSONBody is FastAPI's answer to a body whose Content-Type is not JSON
// (see IsJSONContentType): the raw bytes are the model input, which no
// model accepts. It returns the *Errors of a 422, or ErrBodyNotUTF8 where
// FastAPI would fail writing the echo (a 500 there; a 400 here).
func NonJSONBody(body []byte) error {
	if len(body) == 0 {
		return missingBody()
	}
	if !utf8.Valid(body) {
		return ErrBodyNotUTF8
	}
	var d decoder
	return d.render([]pending{{typ: typeModelAttrs, msg: msgModelAttrs, in: inText, text: string(body)}})
}
