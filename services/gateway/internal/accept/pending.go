package accept

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/record"
)

// Pending finds a batch that the stream acknowledged but no dispatcher has
// recorded yet: it waits in its group's message (or on its own subject)
// until a dispatcher expands it into messages and acks it, which removes it. This is
// what lets GET /api/batches/{id} know a batch from the moment of its 202
// without the gateway writing to PostgreSQL on the request path.
type Pending struct {
	js  jetstream.JetStream
	cfg bus.Config

	mu     sync.Mutex
	stream jetstream.Stream
}

// NewPending looks batches up in cfg's stream.
func NewPending(js jetstream.JetStream, cfg bus.Config) *Pending {
	return &Pending{js: js, cfg: cfg}
}

func (p *Pending) handle(ctx context.Context) (jetstream.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream == nil {
		s, err := p.js.Stream(ctx, p.cfg.Stream)
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %v", ErrUnavailable, p.cfg.Stream, err)
		}
		p.stream = s
	}
	return p.stream, nil
}

// Batch returns the company's batch while it waits in the stream, in its
// group or alone (bus.Config.FindBatch), with status accepted;
// record.ErrNotFound when it is not there.
func (p *Pending) Batch(ctx context.Context, companyID int64, batchID string) (record.Batch, error) {
	s, err := p.handle(ctx)
	if err != nil {
		return record.Batch{}, err
	}
	m, _, err := p.cfg.FindBatch(ctx, s, companyID, batchID)
	if errors.Is(err, bus.ErrBatchNotInStream) {
		return record.Batch{}, record.ErrNotFound
	}
	if err != nil {
		return record.Batch{}, fmt.Errorf("%w: look up batch %s: %v", ErrUnavailable, batchID, err)
	}
	b, err := record.Pending(companyID, m)
	if err != nil {
		return record.Batch{}, fmt.Errorf("pending batch %s: %w", batchID, err)
	}
	return b, nil
}
