package webhooks

import (
	"time"

	"github.com/google/uuid"
)

// EventTime is when the event with this id happened for its deliveries:
// their created_at, the week they are kept in. It is the time in the id, a
// UUIDv7 that events.Append mints as the change commits (Parley's own
// clock, never a provider's), or occurredAt for an id of another version.
// An event fanned out again gives the same time, so its deliveries' unique
// key (endpoint_id, event_id, created_at) still catches the repeat.
func EventTime(eventID string, occurredAt time.Time) time.Time {
	id, err := uuid.Parse(eventID)
	if err != nil || id.Version() != 7 {
		return occurredAt
	}
	return time.Unix(id.Time().UnixTime()).UTC()
}
