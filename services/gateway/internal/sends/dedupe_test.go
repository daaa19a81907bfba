package sends

import (
	"fmt"
	"slices"
	"testing"
)

func TestDedupeKeepsFirstOccurrenceOfEachNormalisedNumber(t *testing.T) {
	short := []string{"+393331234567", "393331234567", "+14155550100", "+393331234567", "14155550100"}
	if got := dedupe(short); !slices.Equal(got, []string{"+393331234567", "+14155550100"}) {
		t.Fatalf("short list: %v", got)
	}
	// Above the scan threshold the map path must agree.
	var long, want []string
	for i := range 40 {
		p := fmt.Sprintf("39333%07d", i)
		long = append(long, p, "+"+p)
		want = append(want, "+"+p)
	}
	if got := dedupe(long); !slices.Equal(got, want) {
		t.Fatalf("long list: %d numbers, want %d", len(got), len(want))
	}
}
