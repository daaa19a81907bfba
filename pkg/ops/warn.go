package ops

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Warner logs a recurring failure at most once per interval per message:
// an outage of PostgreSQL makes every poll fail, and one line per interval
// says as much as four a second.
type Warner struct {
	log      *zap.Logger
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
}

// NewWarner returns a Warner logging to log.
func NewWarner(log *zap.Logger, interval time.Duration) *Warner {
	return &Warner{log: log, interval: interval, last: map[string]time.Time{}}
}

// Warn logs msg at warn level unless it was logged less than the interval ago.
func (w *Warner) Warn(msg string, fields ...zap.Field) {
	w.mu.Lock()
	last, seen := w.last[msg]
	now := time.Now()
	if seen && now.Sub(last) < w.interval {
		w.mu.Unlock()
		return
	}
	w.last[msg] = now
	w.mu.Unlock()
	w.log.Warn(msg, fields...)
}
