package delivery

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
)

func TestNextOpening(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Fatal(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day := &catalog.DeliveryWindow{Start: 9 * time.Hour, End: 20*time.Hour + 30*time.Minute}
	night := &catalog.DeliveryWindow{Start: 22 * time.Hour, End: 6 * time.Hour}
	for _, tc := range []struct {
		name    string
		w       *catalog.DeliveryWindow
		loc     *time.Location
		now     time.Time
		open    bool
		opensAt time.Time
	}{
		{"no window", nil, rome, time.Date(2025, 6, 2, 3, 0, 0, 0, rome), true, time.Time{}},
		{"inside", day, rome, time.Date(2025, 6, 2, 9, 0, 0, 0, rome), true, time.Time{}},
		{"before opening", day, rome, time.Date(2025, 6, 2, 8, 59, 59, 0, rome), false, time.Date(2025, 6, 2, 9, 0, 0, 0, rome)},
		{"at closing", day, rome, time.Date(2025, 6, 2, 20, 30, 0, 0, rome), false, time.Date(2025, 6, 3, 9, 0, 0, 0, rome)},
		// 22:00 UTC is already tomorrow in Rome: the window is read locally.
		{"local day differs from UTC", day, rome, time.Date(2025, 6, 2, 22, 30, 0, 0, time.UTC), false, time.Date(2025, 6, 3, 9, 0, 0, 0, rome)},
		{"wrapping, late", night, rome, time.Date(2025, 6, 2, 23, 0, 0, 0, rome), true, time.Time{}},
		{"wrapping, early", night, rome, time.Date(2025, 6, 2, 5, 59, 0, 0, rome), true, time.Time{}},
		{"wrapping, closed", night, rome, time.Date(2025, 6, 2, 12, 0, 0, 0, rome), false, time.Date(2025, 6, 2, 22, 0, 0, 0, rome)},
		// The night before spring-forward: 09:00 local on the next day is
		// 13:00 UTC (EDT), not 14:00 (EST).
		{"across DST start", day, ny, time.Date(2025, 3, 8, 21, 0, 0, 0, ny), false, time.Date(2025, 3, 9, 13, 0, 0, 0, time.UTC)},
		{"across DST end", day, ny, time.Date(2025, 11, 1, 21, 0, 0, 0, ny), false, time.Date(2025, 11, 2, 14, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, next := NextOpening(tc.w, tc.loc, tc.now)
			if open != tc.open || !next.Equal(tc.opensAt) {
				t.Fatalf("NextOpening(%s) = %v, %v; want %v, %v", tc.now, open, next, tc.open, tc.opensAt)
			}
			if !open {
				if o, _ := NextOpening(tc.w, tc.loc, next); !o {
					t.Fatalf("the window is not open at its opening %s", next)
				}
			}
		})
	}
	// An opening inside a spring-forward gap (02:30 on 2025-03-30 in Rome)
	// is still in the future and inside the window.
	gap := &catalog.DeliveryWindow{Start: 2*time.Hour + 30*time.Minute, End: 5 * time.Hour}
	now := time.Date(2025, 3, 30, 1, 0, 0, 0, rome)
	open, next := NextOpening(gap, rome, now)
	if open || !next.After(now) || next.Sub(now) > 3*time.Hour {
		t.Fatalf("gap opening = %v, %v", open, next)
	}
}

func TestBackoff(t *testing.T) {
	base, limit := time.Second, time.Minute
	for attempt := 1; attempt <= 12; attempt++ {
		bound := min(base<<(attempt-1), limit)
		var maxSeen time.Duration
		for range 200 {
			d := Backoff(base, limit, attempt)
			if d < 0 || d > bound {
				t.Fatalf("attempt %d: %s outside [0, %s]", attempt, d, bound)
			}
			maxSeen = max(maxSeen, d)
		}
		// Full jitter spreads over the whole range, not just its bottom.
		if maxSeen < bound/2 {
			t.Fatalf("attempt %d: largest of 200 draws %s, bound %s", attempt, maxSeen, bound)
		}
	}
	if d := Backoff(base, limit, 500); d > limit {
		t.Fatalf("huge attempt: %s", d)
	}
}
