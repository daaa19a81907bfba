package ratelimit

// Internals the external tests (package ratelimit_test, which may import
// ratelimittest) reach.

type AutoPipeline = autoPipeline

var (
	NewAutoPipeline  = newAutoPipeline
	AllowAtMostWhole = allowAtMostWhole
	ErrClosed        = errClosed
)

// Stats reports how many pipelines were sent and how many commands they held.
func (p *AutoPipeline) Stats() (batches, commands int64) { return p.batches.Load(), p.sent.Load() }
