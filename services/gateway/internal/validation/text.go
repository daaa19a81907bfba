package validation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ParseErrorDetail is the detail of FastAPI's 400 for a body it cannot read
// at all: {"detail":"There was an error parsing the body"}.
const ParseErrorDetail = "There was an error parsing the body"

// ErrBodyUnparseable is returned for bodies FastAPI answers with 400
// ParseErrorDetail instead of a 422: bytes that are not text, an integer
// literal longer than Python's 4300 digits, or nesting deeper than maxDepth.
var ErrBodyUnparseable = errors.New("validation: unparseable request body")

// ErrBodyNotUTF8 is the ErrBodyUnparseable of a body that is not text in the
// encoding json.loads detects (UTF-8, or UTF-16/32 by BOM or NUL pattern).
var ErrBodyNotUTF8 = fmt.Errorf("%w: not valid UTF-8 text", ErrBodyUnparseable)

var (
	errTooDeep    = fmt.Errorf("%w: nesting deeper than %d", ErrBodyUnparseable, maxDepth)
	errIntTooLong = fmt.Errorf("%w: integer literal longer than %d digits", ErrBodyUnparseable, maxIntDigits)
)

// maxIntDigits is CPython's int/str conversion limit
// (sys.get_int_max_str_digits()): json.loads raises ValueError past it.
const maxIntDigits = 4300

// decodeText turns the body into the text json.loads scans, the way
// json.loads(bytes) does: json.detect_encoding, then decode with
// errors="surrogatepass". The result is UTF-8 in which a lone surrogate is
// kept as its 3-byte generalised-UTF-8 form (ED A0..BF xx), so that every
// Python code point is exactly one encoded sequence. surrogates reports
// whether any such sequence may be present.
func decodeText(b []byte) (text []byte, surrogates bool, err error) {
	switch {
	case hasPrefix(b, 0x00, 0x00, 0xFE, 0xFF):
		return decodeUTF32(b[4:], binary.BigEndian)
	case hasPrefix(b, 0xFF, 0xFE, 0x00, 0x00):
		return decodeUTF32(b[4:], binary.LittleEndian)
	case hasPrefix(b, 0xFE, 0xFF):
		return decodeUTF16(b[2:], binary.BigEndian)
	case hasPrefix(b, 0xFF, 0xFE):
		return decodeUTF16(b[2:], binary.LittleEndian)
	case hasPrefix(b, 0xEF, 0xBB, 0xBF):
		return decodeUTF8(b[3:])
	}
	switch {
	case len(b) >= 4 && b[0] == 0 && b[1] != 0:
		return decodeUTF16(b, binary.BigEndian)
	case len(b) >= 4 && b[0] == 0:
		return decodeUTF32(b, binary.BigEndian)
	case len(b) >= 4 && b[1] == 0 && (b[2] != 0 || b[3] != 0):
		return decodeUTF16(b, binary.LittleEndian)
	case len(b) >= 4 && b[1] == 0:
		return decodeUTF32(b, binary.LittleEndian)
	case len(b) == 2 && b[0] == 0:
		return decodeUTF16(b, binary.BigEndian)
	case len(b) == 2 && b[1] == 0:
		return decodeUTF16(b, binary.LittleEndian)
	}
	return decodeUTF8(b)
}

func hasPrefix(b []byte, p ...byte) bool {
	if len(b) < len(p) {
		return false
	}
	for i, c := range p {
		if b[i] != c {
			return false
		}
	}
	return true
}

// decodeUTF8 accepts valid UTF-8 plus, as "surrogatepass" does, UTF-8
// encoded surrogates.
func decodeUTF8(b []byte) ([]byte, bool, error) {
	if utf8.Valid(b) {
		return b, false, nil
	}
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if isSurrogateSeq(b[i:]) {
				i += 3
				continue
			}
			return nil, false, ErrBodyNotUTF8
		}
		i += size
	}
	return b, true, nil
}

// isSurrogateSeq reports whether b starts with the UTF-8 form of a surrogate.
func isSurrogateSeq(b []byte) bool {
	return len(b) >= 3 && b[0] == 0xED && b[1] >= 0xA0 && b[1] <= 0xBF && b[2]&0xC0 == 0x80
}

// isSurrogateSeqAt is isSurrogateSeq for s[i:].
func isSurrogateSeqAt(s string, i int) bool {
	return i+3 <= len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80
}

func decodeUTF16(b []byte, order binary.ByteOrder) ([]byte, bool, error) {
	if len(b)%2 != 0 {
		return nil, false, ErrBodyNotUTF8
	}
	out := make([]byte, 0, len(b)+len(b)/2)
	surrogates := false
	for i := 0; i < len(b); i += 2 {
		u := rune(order.Uint16(b[i:]))
		if u >= 0xD800 && u <= 0xDBFF && i+4 <= len(b) {
			if v := rune(order.Uint16(b[i+2:])); v >= 0xDC00 && v <= 0xDFFF {
				out = utf8.AppendRune(out, 0x10000+(u-0xD800)<<10+(v-0xDC00))
				i += 2
				continue
			}
		}
		if u >= 0xD800 && u <= 0xDFFF {
			surrogates = true
		}
		out = appendCodePoint(out, u)
	}
	return out, surrogates, nil
}

func decodeUTF32(b []byte, order binary.ByteOrder) ([]byte, bool, error) {
	if len(b)%4 != 0 {
		return nil, false, ErrBodyNotUTF8
	}
	out := make([]byte, 0, len(b))
	surrogates := false
	for i := 0; i < len(b); i += 4 {
		u := order.Uint32(b[i:])
		if u > utf8.MaxRune {
			return nil, false, ErrBodyNotUTF8
		}
		if u >= 0xD800 && u <= 0xDFFF {
			surrogates = true
		}
		out = appendCodePoint(out, rune(u))
	}
	return out, surrogates, nil
}

// appendCodePoint is utf8.AppendRune that also writes surrogates (as
// generalised UTF-8) instead of replacing them.
func appendCodePoint(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

// charIndex converts a byte offset in decoded text to Python's string index.
func charIndex(text string, off int) int {
	n := 0
	for i := 0; i < off && i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			n++
		}
	}
	return n
}

// IsJSONContentType reports whether FastAPI parses a body with this
// Content-Type header as JSON: no header, application/json, or
// application/<anything>+json, judged the way email.message.Message does
// (parameters dropped, case folded, a value without exactly one '/' counts
// as text/plain). For other types FastAPI validates the raw bytes; see
// NonJSONBody.
func IsJSONContentType(header string) bool {
	if header == "" {
		return true
	}
	v := header
	for i := 0; i < len(v); i++ {
		if v[i] == ';' {
			v = v[:i]
			break
		}
	}
	v = trimPySpace(v)
	slash := -1
	for i := 0; i < len(v); i++ {
		if v[i] == '/' {
			if slash >= 0 {
				return false
			}
			slash = i
		}
	}
	if slash < 0 {
		return false
	}
	main, sub := v[:slash], v[slash+1:]
	if !equalFoldASCII(main, "application") {
		return false
	}
	return equalFoldASCII(sub, "json") || len(sub) >= 5 && equalFoldASCII(sub[len(sub)-5:], "+json")
}

// trimPySpace is str.strip() for a header value, whose bytes Starlette
// reads as Latin-1.
func trimPySpace(s string) string {
	isSpace := func(c byte) bool {
		return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0
	}
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// equalFoldASCII compares s with the lower-case ASCII word w. Python's
// lower() maps no Latin-1 letter outside ASCII onto ASCII, so folding ASCII
// is enough.
func equalFoldASCII(s, w string) bool {
	if len(s) != len(w) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}
