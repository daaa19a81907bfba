package validation

import (
	"math"
	"strconv"
	"strings"
	"unicode"
)

// This file holds pydantic-core's lax (python mode) coercions from
// src/input/shared.rs: str -> int, float -> int, str -> bool.

type intStatus uint8

const (
	intOK intStatus = iota
	intInvalid
	intOutOfRange // jiter's NumberOutOfRange: more than 4300 characters
)

// jiterInt is jiter's NumberInt::try_from(bytes): the whole string must be
// a JSON integer. big is set when it does not fit in int64.
func jiterInt(s string) (v int64, big bool, st intStatus) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return 0, false, intInvalid
	}
	if s[i] == '0' {
		if i+1 == len(s) {
			return 0, false, intOK
		}
		return 0, false, intInvalid
	}
	if s[i] < '1' || s[i] > '9' {
		return 0, false, intInvalid
	}
	j := i + 1
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j > maxIntDigits {
		// jiter counts from the start of the number, sign included, and
		// checks before looking at what follows the digits.
		return 0, false, intOutOfRange
	}
	if j != len(s) {
		return 0, false, intInvalid
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, true, intOK
	}
	return v, false, intOK
}

// strAsInt is pydantic-core's str_as_int.
func strAsInt(s string) (v int64, big bool, errType string) {
	v, big, st := jiterInt(s)
	switch st {
	case intOK:
		return v, big, ""
	case intOutOfRange:
		return 0, false, typeIntParsingSize
	}
	cleaned, ok := cleanIntStr(s)
	if !ok {
		return 0, false, typeIntParsing
	}
	v, big, st = jiterInt(cleaned)
	if st != intOK {
		return 0, false, typeIntParsing
	}
	return v, big, ""
}

// cleanIntStr is pydantic-core's clean_int_str: whitespace, a leading '+',
// leading zeros, a ".000" tail and digit-separating underscores go.
func cleanIntStr(s string) (string, bool) {
	lenBefore := len(s)
	s = strings.TrimFunc(s, unicode.IsSpace)
	if strings.HasPrefix(s, "+") {
		if strings.HasPrefix(s[1:], "-") {
			return "", false
		}
		s = s[1:]
	}
	neg := false
	if strings.HasPrefix(s, "-") {
		rest := s[1:]
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return "", false
		}
		neg = true
		s = rest
	}
	s, ok := stripLeadingZeros(s)
	if !ok {
		return "", false
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if dec := s[i+1:]; dec != "" && strings.Trim(dec, "0") == "" {
			s = s[:i]
		}
	}
	sign := ""
	if neg {
		sign = "-"
	}
	if stripped, ok := stripUnderscores(s); ok {
		return sign + stripped, true
	}
	if lenBefore == len(s) {
		return "", false
	}
	return sign + s, true
}

// stripLeadingZeros is pydantic-core's strip_leading_zeros.
func stripLeadingZeros(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	switch c := s[0]; {
	case c == '0':
	case c >= '1' && c <= '9', c == '-':
		return s, true
	default:
		return "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '0', c == '_':
		case c >= '1' && c <= '9', c == '-':
			return s[i:], true
		case c == '.':
			return s[i-1:], true
		default:
			return "", false
		}
	}
	return s[len(s)-1:], true
}

// stripUnderscores is pydantic-core's strip_underscores.
func stripUnderscores(s string) (string, bool) {
	if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || !strings.Contains(s, "_") || strings.Contains(s, "__") {
		return "", false
	}
	return strings.ReplaceAll(s, "_", ""), true
}

// floatAsInt is pydantic-core's float_as_int.
func floatAsInt(f float64) (int64, string) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, typeFiniteNumber
	case math.Mod(f, 1) != 0:
		return 0, typeIntFromFloat
	case -9223372036854775808.0 < f && f < 9223372036854775808.0:
		return int64(f), ""
	}
	return 0, typeIntParsingSize
}

// strAsBool is pydantic-core's str_as_bool (ASCII case folding only).
func strAsBool(s string) (bool, bool) {
	switch {
	case s == "0" || equalFoldASCII(s, "f") || equalFoldASCII(s, "n") || equalFoldASCII(s, "no") ||
		equalFoldASCII(s, "off") || equalFoldASCII(s, "false"):
		return false, true
	case s == "1" || equalFoldASCII(s, "t") || equalFoldASCII(s, "y") || equalFoldASCII(s, "on") ||
		equalFoldASCII(s, "yes") || equalFoldASCII(s, "true"):
		return true, true
	}
	return false, false
}
