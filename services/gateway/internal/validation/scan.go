package validation

import (
	"strconv"
)

// maxDepth bounds nesting. CPython's scanner gives up (RecursionError, which
// FastAPI answers with 400) at a depth that depends on the caller's stack,
// near 1000; the gateway answers the same 400 past a fixed depth.
const maxDepth = 512

type kind uint8

const (
	kNull kind = iota
	kFalse
	kTrue
	kInt    // raw JSON integer literal in text
	kFloat  // raw JSON float literal in text
	kNaN    // NaN
	kInf    // Infinity
	kNegInf // -Infinity
	kString
	kArray
	kObject
	kMember // an object member: key in start/end/flags, value in first
)

const (
	fArena     uint8 = 1 << iota // string bytes live in the arena, not in the text
	fSurrogate                   // string holds a lone surrogate
)

// node is one value of the parsed document. Containers link their children
// through first/next; objects hold kMember nodes, one per distinct key in
// first-seen order, each pointing at the last value given for that key (a
// Python dict built by json.loads).
type node struct {
	kind       kind
	flags      uint8
	start, end int32 // string bytes, or the raw number literal
	first      int32 // container: first child; member: value
	next       int32 // next sibling, or -1
	n          int32 // container: number of children
}

// jsonError is json.JSONDecodeError: CPython's message and the byte offset
// it refers to (converted to a character index when reported).
type jsonError struct {
	msg string
	off int
}

const (
	msgExpectingValue     = "Expecting value"
	msgExpectingProperty  = "Expecting property name enclosed in double quotes"
	msgExpectingColon     = "Expecting ':' delimiter"
	msgExpectingComma     = "Expecting ',' delimiter"
	msgExtraData          = "Extra data"
	msgUnterminatedString = "Unterminated string starting at"
	msgControlChar        = "Invalid control character at"
	msgInvalidEscape      = "Invalid \\escape"
	msgInvalidUnicode     = "Invalid \\uXXXX escape"
)

// parser mirrors CPython's C scanner (Modules/_json.c, scan_once_unicode
// and friends) over the decoded text: same accepted language, same error
// messages at the same positions. It follows CPython 3.11 and 3.12; 3.13
// reports a trailing comma as "Illegal trailing comma before end of
// object/array" at the comma instead.
type parser struct {
	text       string
	surrogates bool // text may hold surrogate sequences
	nodes      []node
	arena      []byte
	depth      int
	jerr       *jsonError
	fatal      error // ErrBodyUnparseable cases
}

func (p *parser) reset(text string, surrogates bool) {
	p.text = text
	p.surrogates = surrogates
	p.nodes = p.nodes[:0]
	p.arena = p.arena[:0]
	p.depth = 0
	p.jerr = nil
	p.fatal = nil
}

func (p *parser) fail(msg string, off int) {
	if p.jerr == nil && p.fatal == nil {
		p.jerr = &jsonError{msg: msg, off: off}
	}
}

func (p *parser) failed() bool { return p.jerr != nil || p.fatal != nil }

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) skipWS(i int) int {
	for i < len(p.text) && isWS(p.text[i]) {
		i++
	}
	return i
}

func (p *parser) add(n node) int32 {
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

// document is json.loads' decode(): whitespace, one value, whitespace, end.
func (p *parser) document() int32 {
	i := p.skipWS(0)
	root, end := p.value(i)
	if p.failed() {
		return -1
	}
	end = p.skipWS(end)
	if end != len(p.text) {
		p.fail(msgExtraData, end)
		return -1
	}
	return root
}

// value is scan_once_unicode. A StopIteration there is "Expecting value" at
// the index it carries.
func (p *parser) value(i int) (int32, int) {
	t := p.text
	if i >= len(t) {
		p.fail(msgExpectingValue, i)
		return -1, 0
	}
	switch t[i] {
	case '"':
		return p.str(i + 1)
	case '{':
		if !p.enter() {
			return -1, 0
		}
		n, end := p.object(i + 1)
		p.depth--
		return n, end
	case '[':
		if !p.enter() {
			return -1, 0
		}
		n, end := p.array(i + 1)
		p.depth--
		return n, end
	case 'n':
		if i+3 < len(t) && t[i+1:i+4] == "ull" {
			return p.add(node{kind: kNull, next: -1}), i + 4
		}
	case 't':
		if i+3 < len(t) && t[i+1:i+4] == "rue" {
			return p.add(node{kind: kTrue, next: -1}), i + 4
		}
	case 'f':
		if i+4 < len(t) && t[i+1:i+5] == "alse" {
			return p.add(node{kind: kFalse, next: -1}), i + 5
		}
	case 'N':
		if i+2 < len(t) && t[i+1:i+3] == "aN" {
			return p.add(node{kind: kNaN, next: -1}), i + 3
		}
	case 'I':
		if i+7 < len(t) && t[i+1:i+8] == "nfinity" {
			return p.add(node{kind: kInf, next: -1}), i + 8
		}
	case '-':
		if i+8 < len(t) && t[i+1:i+9] == "Infinity" {
			return p.add(node{kind: kNegInf, next: -1}), i + 9
		}
	}
	return p.number(i)
}

func (p *parser) enter() bool {
	p.depth++
	if p.depth > maxDepth {
		if !p.failed() {
			p.fatal = errTooDeep
		}
		return false
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number is _match_number_unicode.
func (p *parser) number(start int) (int32, int) {
	t := p.text
	last := len(t) - 1
	i := start
	if t[i] == '-' {
		i++
		if i > last {
			p.fail(msgExpectingValue, start)
			return -1, 0
		}
	}
	switch {
	case t[i] >= '1' && t[i] <= '9':
		i++
		for i <= last && isDigit(t[i]) {
			i++
		}
	case t[i] == '0':
		i++
	default:
		p.fail(msgExpectingValue, start)
		return -1, 0
	}
	isFloat := false
	if i < last && t[i] == '.' && isDigit(t[i+1]) {
		isFloat = true
		i += 2
		for i <= last && isDigit(t[i]) {
			i++
		}
	}
	if i < last && (t[i] == 'e' || t[i] == 'E') {
		eStart := i
		i++
		if i < last && (t[i] == '-' || t[i] == '+') {
			i++
		}
		for i <= last && isDigit(t[i]) {
			i++
		}
		if isDigit(t[i-1]) {
			isFloat = true
		} else {
			i = eStart
		}
	}
	if isFloat {
		return p.add(node{kind: kFloat, start: int32(start), end: int32(i), next: -1}), i
	}
	digits := i - start
	if t[start] == '-' {
		digits--
	}
	if digits > maxIntDigits {
		// PyLong_FromString raises ValueError, not JSONDecodeError.
		if !p.failed() {
			p.fatal = errIntTooLong
		}
		return -1, 0
	}
	return p.add(node{kind: kInt, start: int32(start), end: int32(i), next: -1}), i
}

// object is _parse_object_unicode; i is just past '{'.
func (p *parser) object(i int) (int32, int) {
	t := p.text
	obj := p.add(node{kind: kObject, first: -1, next: -1})
	var tail int32 = -1
	var big map[string]int32
	i = p.skipWS(i)
	if i >= len(t) || t[i] != '}' {
		for {
			if i >= len(t) || t[i] != '"' {
				p.fail(msgExpectingProperty, i)
				return -1, 0
			}
			key, end := p.str(i + 1)
			if p.failed() {
				return -1, 0
			}
			i = p.skipWS(end)
			if i >= len(t) || t[i] != ':' {
				p.fail(msgExpectingColon, i)
				return -1, 0
			}
			i = p.skipWS(i + 1)
			val, end := p.value(i)
			if p.failed() {
				return -1, 0
			}
			tail, big = p.setMember(obj, tail, key, val, big)
			i = p.skipWS(end)
			if i < len(t) && t[i] == '}' {
				break
			}
			if i >= len(t) || t[i] != ',' {
				p.fail(msgExpectingComma, i)
				return -1, 0
			}
			i = p.skipWS(i + 1)
		}
	}
	return obj, i + 1
}

// setMember is dict[key] = val: a repeated key keeps its first position and
// takes the new value. The key's string node becomes the member node.
func (p *parser) setMember(obj, tail, key, val int32, big map[string]int32) (int32, map[string]int32) {
	o := &p.nodes[obj]
	if big != nil {
		k := &p.nodes[key]
		var m int32
		var ok bool
		if k.flags&fArena != 0 {
			m, ok = big[string(p.arena[k.start:k.end])]
		} else {
			m, ok = big[p.text[k.start:k.end]]
		}
		if ok {
			p.nodes[m].first = val
			return tail, big
		}
	} else {
		for m := o.first; m >= 0; m = p.nodes[m].next {
			if p.keyEqual(m, key) {
				p.nodes[m].first = val
				return tail, big
			}
		}
	}
	mem := &p.nodes[key]
	mem.kind = kMember
	mem.first = val
	if tail < 0 {
		o.first = key
	} else {
		p.nodes[tail].next = key
	}
	o.n++
	if big == nil && o.n > 16 {
		// Linear search is quadratic in the number of keys; large objects
		// (only ever extra, ignored fields) switch to a map.
		big = make(map[string]int32, 2*o.n)
		for m := o.first; m >= 0; m = p.nodes[m].next {
			big[p.copyStr(m)] = m
		}
	} else if big != nil {
		big[p.copyStr(key)] = key
	}
	return key, big
}

// keyEqual compares two string nodes while parsing, without copying.
func (p *parser) keyEqual(a, b int32) bool {
	x, y := &p.nodes[a], &p.nodes[b]
	if x.end-x.start != y.end-y.start {
		return false
	}
	xa, ya := x.flags&fArena != 0, y.flags&fArena != 0
	switch {
	case !xa && !ya:
		return p.text[x.start:x.end] == p.text[y.start:y.end]
	case xa && ya:
		return string(p.arena[x.start:x.end]) == string(p.arena[y.start:y.end])
	case xa:
		return string(p.arena[x.start:x.end]) == p.text[y.start:y.end]
	default:
		return p.text[x.start:x.end] == string(p.arena[y.start:y.end])
	}
}

// copyStr copies a string node's content while parsing.
func (p *parser) copyStr(n int32) string {
	nd := &p.nodes[n]
	if nd.flags&fArena != 0 {
		return string(p.arena[nd.start:nd.end])
	}
	return p.text[nd.start:nd.end]
}

// array is _parse_array_unicode; i is just past '['.
func (p *parser) array(i int) (int32, int) {
	t := p.text
	arr := p.add(node{kind: kArray, first: -1, next: -1})
	var tail int32 = -1
	i = p.skipWS(i)
	if i >= len(t) || t[i] != ']' {
		for {
			val, end := p.value(i)
			if p.failed() {
				return -1, 0
			}
			if tail < 0 {
				p.nodes[arr].first = val
			} else {
				p.nodes[tail].next = val
			}
			tail = val
			p.nodes[arr].n++
			i = p.skipWS(end)
			if i < len(t) && t[i] == ']' {
				break
			}
			if i >= len(t) || t[i] != ',' {
				p.fail(msgExpectingComma, i)
				return -1, 0
			}
			i = p.skipWS(i + 1)
		}
	}
	return arr, i + 1
}

// str is scanstring_unicode with strict=True; end is just past the opening
// quote. Strings without escapes point into the text; others are decoded
// into the arena.
func (p *parser) str(end int) (int32, int) {
	t := p.text
	begin := end - 1
	var flags uint8
	arenaStart := -1
	for {
		next := end
		for next < len(t) {
			c := t[next]
			if !strSpecial[c] {
				next++
				continue
			}
			if c == '"' || c == '\\' {
				break
			}
			if c <= 0x1f {
				p.fail(msgControlChar, next)
				return -1, 0
			}
			if p.surrogates && isSurrogateSeqAt(t, next) { // c is 0xED
				flags |= fSurrogate
			}
			next++
		}
		if next >= len(t) {
			p.fail(msgUnterminatedString, begin)
			return -1, 0
		}
		c := t[next]
		if c == '"' && arenaStart < 0 {
			return p.add(node{kind: kString, flags: flags, start: int32(end), end: int32(next), next: -1}), next + 1
		}
		if arenaStart < 0 {
			arenaStart = len(p.arena)
			flags |= fArena
		}
		p.arena = append(p.arena, t[end:next]...)
		next++
		if c == '"' {
			end = next
			break
		}
		if next == len(t) {
			p.fail(msgUnterminatedString, begin)
			return -1, 0
		}
		c = t[next]
		if c != 'u' {
			end = next + 1
			var r byte
			switch c {
			case '"', '\\', '/':
				r = c
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				p.fail(msgInvalidEscape, end-2)
				return -1, 0
			}
			p.arena = append(p.arena, r)
			continue
		}
		next++ // past 'u'
		end = next + 4
		if end >= len(t) {
			p.fail(msgInvalidUnicode, next-1)
			return -1, 0
		}
		r, ok := hex4(t[next:end])
		if !ok {
			p.fail(msgInvalidUnicode, end-5)
			return -1, 0
		}
		if r >= 0xD800 && r <= 0xDBFF && end+6 < len(t) && t[end] == '\\' && t[end+1] == 'u' {
			r2, ok := hex4(t[end+2 : end+6])
			if !ok {
				p.fail(msgInvalidUnicode, end+1)
				return -1, 0
			}
			if r2 >= 0xDC00 && r2 <= 0xDFFF {
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				end += 6
			}
		}
		if r >= 0xD800 && r <= 0xDFFF {
			flags |= fSurrogate
		}
		p.arena = appendCodePoint(p.arena, r)
	}
	return p.add(node{kind: kString, flags: flags, start: int32(arenaStart), end: int32(len(p.arena)), next: -1}), end
}

// strSpecial marks the bytes the string scanner must look at: the quote,
// the backslash, control characters, and 0xED, which starts a surrogate.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'], t[0xED] = true, true, true
	return t
}()

func hex4(s string) (rune, bool) {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// parseIntLiteral reads a JSON integer literal; ok is false outside int64.
func parseIntLiteral(lit string) (int64, bool) {
	v, err := strconv.ParseInt(lit, 10, 64)
	return v, err == nil
}

// parseFloatLiteral is Python's float() of a JSON float literal: correctly
// rounded, overflowing to ±Inf and underflowing to 0 without error.
func parseFloatLiteral(lit string) float64 {
	f, _ := strconv.ParseFloat(lit, 64)
	return f
}
