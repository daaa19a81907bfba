// Package phone checks and normalises the phone numbers of the API: E.164,
// digits only, with or without the leading '+' (spec pattern ^\+?[1-9]\d{6,14}$).
package phone

import "slices"

// Pattern is the spec's pattern, as reported in validation errors.
const Pattern = `^\+?[1-9]\d{6,14}$`

// Valid reports whether s matches Pattern with ASCII digits only (Python's
// \d would also accept other scripts' digits; the spec means E.164).
func Valid(s string) bool {
	if len(s) > 0 && s[0] == '+' {
		s = s[1:]
	}
	if len(s) < 7 || len(s) > 15 || s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Normalize returns the number with its leading '+', so that "+39333..." and
// "39333..." are one number. ok is false when s is not Valid.
func Normalize(s string) (string, bool) {
	if !Valid(s) {
		return "", false
	}
	if s[0] == '+' {
		return s, true
	}
	return "+" + s, true
}

// FirstOfEach is the duplicate rule of every send: a number is sent to once
// per batch. It normalises the number of each entry (number(e)) and keeps
// the first entry of each number, in order, dropping the later ones whole;
// numbers are the kept entries' normalised numbers. bad is the index of the
// first entry whose number is not Valid (nothing is returned then), -1 when
// every number is.
func FirstOfEach[T any](entries []T, number func(T) string) (kept []T, numbers []string, bad int) {
	kept = make([]T, 0, len(entries))
	numbers = make([]string, 0, len(entries))
	// A short list is cheaper to scan than to hash into a map.
	var seen map[string]struct{}
	if len(entries) > 32 {
		seen = make(map[string]struct{}, len(entries))
	}
	for i, e := range entries {
		p, ok := Normalize(number(e))
		if !ok {
			return nil, nil, i
		}
		if seen == nil {
			if slices.Contains(numbers, p) {
				continue
			}
		} else if _, dup := seen[p]; dup {
			continue
		} else {
			seen[p] = struct{}{}
		}
		kept = append(kept, e)
		numbers = append(numbers, p)
	}
	return kept, numbers, -1
}

// Itself is the number of an entry that is the number (FirstOfEach over
// plain numbers).
func Itself(s string) string { return s }
