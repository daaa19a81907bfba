// Package phone checks and normalises the phone numbers of the API: E.164,
// digits only, with or without the leading '+' (spec pattern ^\+?[1-9]\d{6,14}$).
package phone

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
