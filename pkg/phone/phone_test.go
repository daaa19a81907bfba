package phone

import (
	"fmt"
	"slices"
	"testing"
)

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

func TestFirstOfEachKeepsTheFirstEntryOfEachNormalisedNumber(t *testing.T) {
	type entry struct{ phone, name string }
	in := []entry{{"+393331234567", "first"}, {"393331234567", "second"}, {"14155550100", "other"}, {"+393331234567", "third"}}
	kept, numbers, bad := FirstOfEach(in, func(e entry) string { return e.phone })
	if bad != -1 || !slices.Equal(numbers, []string{"+393331234567", "+14155550100"}) ||
		!slices.Equal(kept, []entry{{"+393331234567", "first"}, {"14155550100", "other"}}) {
		t.Fatalf("kept %v, numbers %v, bad %d", kept, numbers, bad)
	}
	// Above the scan threshold the map path must agree.
	var long, want []string
	for i := range 40 {
		p := fmt.Sprintf("39333%07d", i)
		long = append(long, p, "+"+p)
		want = append(want, "+"+p)
	}
	if kept, numbers, bad := FirstOfEach(long, Itself); bad != -1 || !slices.Equal(numbers, want) || len(kept) != 40 || kept[1] != long[2] {
		t.Fatalf("long list: %d numbers (bad %d), want %d", len(numbers), bad, len(want))
	}
	// An invalid number is reported by its index.
	if kept, numbers, bad := FirstOfEach([]string{"+393331234567", "393331234567", "12"}, Itself); bad != 2 || kept != nil || numbers != nil {
		t.Fatalf("invalid number: %v %v %d", kept, numbers, bad)
	}
}
