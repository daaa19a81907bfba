package accept

import (
	"time"

	"github.com/parleyhq/parley/pkg/bus"
)

// SetGroupIDs makes p draw its group ids from next (tests only).
func SetGroupIDs(p *Publisher, next func(time.Time) (bus.GroupID, error)) { p.newGroupID = next }
