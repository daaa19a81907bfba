package accept

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/record"
)

// Pending finds a batch that the stream acknowledged but no dispatcher has
// recorded yet (record.Stream), and says ErrUnavailable when the stream
// cannot be read.
type Pending struct {
	stream *record.Stream
}

// NewPending looks batches up in cfg's stream.
func NewPending(js jetstream.JetStream, cfg bus.Config) *Pending {
	return &Pending{stream: record.NewStream(js, cfg)}
}

// Batch returns the company's batch while it waits in the stream, with
// status accepted; record.ErrNotFound when it is not there.
func (p *Pending) Batch(ctx context.Context, companyID int64, batchID string) (record.Batch, error) {
	b, err := p.stream.Batch(ctx, companyID, batchID)
	if errors.Is(err, record.ErrStreamUnreadable) {
		return record.Batch{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return b, err
}
