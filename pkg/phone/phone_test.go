package phone

import "testing"

func TestNormalize(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"+393331234567", "+393331234567", true},
		{"393331234567", "+393331234567", true},
		{"1234567", "+1234567", true},                  // 7 digits: shortest
		{"+123456789012345", "+123456789012345", true}, // 15 digits: longest
		{"1234567890123456", "", false},                // 16 digits
		{"123456", "", false},                          // 6 digits
		{"0123456789", "", false},                      // leading zero
		{"++1234567", "", false},
		{"+", "", false},
		{"", "", false},
		{"+39 333 1234567", "", false},
		{"+٣٩٣٣٣١٢٣٤٥٦٧", "", false}, // Arabic-Indic digits
		{"12345678９", "", false},     // full-width digit
	}
	for _, c := range cases {
		got, ok := Normalize(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
