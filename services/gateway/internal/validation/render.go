package validation

import (
	"math"
	"strconv"
	"strings"
)

// This file writes JSON the way Starlette's JSONResponse does:
// json.dumps(ensure_ascii=False, allow_nan=False, separators=(",", ":")),
// after FastAPI's jsonable_encoder. Two values json.dumps cannot write get a
// policy instead of FastAPI's 500 (see the package doc): non-finite floats
// become null, lone surrogates become \udXXX escapes.

const hexDigits = "0123456789abcdef"

// appendPyString writes s as json.dumps(ensure_ascii=False) does: only
// quote, backslash and control characters are escaped.
func appendPyString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != 0xED {
			i++
			continue
		}
		if c == 0xED {
			if !isSurrogateSeqAt(s, i) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			r := rune(0xD000) | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
			b = append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
			i += 3
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendPyFloat writes f as Python's repr(float), or null when it is not
// finite.
func appendPyFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // shortest round-trip digits, as repr
	if s[0] == '-' {
		b = append(b, '-')
		s = s[1:]
	}
	e := 0
	for s[e] != 'e' {
		e++
	}
	exp, _ := strconv.Atoi(string(s[e+1:]))
	var dbuf [24]byte
	digits := append(dbuf[:0], s[0])
	if e > 1 {
		digits = append(digits, s[2:e]...)
	}
	decpt := exp + 1
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			b = append(b, '0', '.')
			for i := 0; i < -decpt; i++ {
				b = append(b, '0')
			}
			return append(b, digits...)
		case decpt >= len(digits):
			b = append(b, digits...)
			for i := len(digits); i < decpt; i++ {
				b = append(b, '0')
			}
			return append(b, '.', '0')
		default:
			b = append(b, digits[:decpt]...)
			b = append(b, '.')
			return append(b, digits[decpt:]...)
		}
	}
	b = append(b, digits[0])
	if len(digits) > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	x := decpt - 1
	b = append(b, 'e')
	if x < 0 {
		b = append(b, '-')
		x = -x
	} else {
		b = append(b, '+')
	}
	if x < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(x), 10)
}

// appendPyInt writes a JSON integer literal as Python prints the int it
// became: the only literal that changes is -0.
func appendPyInt(b []byte, lit string) []byte {
	if lit == "-0" {
		return append(b, '0')
	}
	return append(b, lit...)
}

// appendValue writes node n as the echoed input of an error item.
func (d *decoder) appendValue(b []byte, n int32) []byte {
	nd := &d.nodes[n]
	switch nd.kind {
	case kNull:
		return append(b, "null"...)
	case kTrue:
		return append(b, "true"...)
	case kFalse:
		return append(b, "false"...)
	case kInt:
		return appendPyInt(b, d.raw(nd))
	case kFloat:
		return appendPyFloat(b, parseFloatLiteral(d.raw(nd)))
	case kNaN, kInf, kNegInf:
		return append(b, "null"...)
	case kString, kMember:
		return appendPyString(b, d.str(nd))
	case kArray:
		b = append(b, '[')
		for c := nd.first; c >= 0; c = d.nodes[c].next {
			if c != nd.first {
				b = append(b, ',')
			}
			b = d.appendValue(b, c)
		}
		return append(b, ']')
	case kObject:
		b = append(b, '{')
		first := true
		for m := nd.first; m >= 0; m = d.nodes[m].next {
			key := d.str(&d.nodes[m])
			if strings.HasPrefix(key, "_sa") {
				// jsonable_encoder(sqlalchemy_safe=True) drops these keys.
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendPyString(b, key)
			b = append(b, ':')
			b = d.appendValue(b, d.nodes[m].first)
		}
		return append(b, '}')
	}
	return b
}
