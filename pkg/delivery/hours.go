package delivery

import (
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
)

// NextOpening says whether non-forced campaign messages may go out at now
// under an account's delivery window, read in loc; when they may not, it
// returns the next instant the window opens. A nil window is always open.
//
// The window is local wall-clock time: [Start, End), wrapping midnight when
// End is before Start. The opening is computed with the zone's rules for
// that day, so it stays at the same local time across DST changes; an
// opening that falls in a spring-forward gap is whatever instant Go's
// time.Date gives for it, never one already past.
func NextOpening(w *catalog.DeliveryWindow, loc *time.Location, now time.Time) (open bool, next time.Time) {
	if w == nil {
		return true, time.Time{}
	}
	local := now.In(loc)
	y, m, d := local.Date()
	// The wall clock, not the time elapsed since midnight: on a DST day the
	// two differ by an hour.
	wall := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute +
		time.Duration(local.Second())*time.Second + time.Duration(local.Nanosecond())
	if w.Start < w.End {
		open = wall >= w.Start && wall < w.End
	} else {
		open = wall >= w.Start || wall < w.End
	}
	if open {
		return true, time.Time{}
	}
	h := int(w.Start / time.Hour)
	mi := int(w.Start % time.Hour / time.Minute)
	s := int(w.Start % time.Minute / time.Second)
	for i := 0; i < 3; i++ {
		cand := time.Date(y, m, d+i, h, mi, s, 0, loc)
		if cand.After(now) {
			return false, cand
		}
	}
	// Unreachable: some opening within three days is after now.
	return false, now.Add(24 * time.Hour)
}
