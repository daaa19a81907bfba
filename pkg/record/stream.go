package record

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// ErrStreamUnreadable is a stream that could not be read: whether the
// batch waits in it is unknown.
var ErrStreamUnreadable = errors.New("the stream cannot be read")

// Stream finds a batch that the SENDS stream acknowledged but no dispatcher
// has recorded yet: it waits in its group's message (or on its own
// subject) until a dispatcher expands it into messages and acks it, which
// removes it. This is what lets the gateway's GET /api/batches/{id}, and
// parleyctl, know a batch from the moment of its 202 without the gateway
// writing to PostgreSQL on the request path.
type Stream struct {
	js  jetstream.JetStream
	cfg bus.Config

	mu     sync.Mutex
	stream jetstream.Stream
}

// NewStream looks batches up in cfg's stream.
func NewStream(js jetstream.JetStream, cfg bus.Config) *Stream {
	return &Stream{js: js, cfg: cfg}
}

func (p *Stream) handle(ctx context.Context) (jetstream.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream == nil {
		s, err := p.js.Stream(ctx, p.cfg.Stream)
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %v", ErrStreamUnreadable, p.cfg.Stream, err)
		}
		p.stream = s
	}
	return p.stream, nil
}

// Batch returns the company's batch while it waits in the stream, in its
// group or alone (bus.Config.FindBatch), as Pending describes it (status
// accepted, no messages); ErrNotFound when it is not there,
// ErrStreamUnreadable when the stream cannot be read.
func (p *Stream) Batch(ctx context.Context, companyID int64, batchID string) (Batch, error) {
	s, err := p.handle(ctx)
	if err != nil {
		return Batch{}, err
	}
	m, _, err := p.cfg.FindBatch(ctx, s, companyID, batchID)
	if errors.Is(err, bus.ErrBatchNotInStream) {
		return Batch{}, ErrNotFound
	}
	if err != nil {
		return Batch{}, fmt.Errorf("%w: look up batch %s: %v", ErrStreamUnreadable, batchID, err)
	}
	b, err := Pending(companyID, m)
	if err != nil {
		return Batch{}, fmt.Errorf("pending batch %s: %w", batchID, err)
	}
	return b, nil
}

// ReplyMessageID is the message id of the company's reply batch: recorded
// already, or still waiting in the stream (w may be nil: the record only);
// ok is false when neither holds it. A reply retried after a publish that
// ended in doubt reuses the id its first attempt gave, so that the 202 of
// the retry names the message the dispatcher records.
func ReplyMessageID(ctx context.Context, db DB, w *Stream, companyID int64, batchID string) (id int64, ok bool, err error) {
	err = db.QueryRow(ctx, `SELECT id FROM messages WHERE batch_id = $1::uuid AND company_id = $2 LIMIT 1`, batchID, companyID).Scan(&id)
	switch {
	case err == nil:
		return id, true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, false, fmt.Errorf("reply %s: %w", batchID, err)
	case w == nil:
		return 0, false, nil
	}
	s, err := w.handle(ctx)
	if err != nil {
		return 0, false, err
	}
	m, _, err := w.cfg.FindBatch(ctx, s, companyID, batchID)
	if errors.Is(err, bus.ErrBatchNotInStream) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: look up reply %s: %v", ErrStreamUnreadable, batchID, err)
	}
	r, isReply := m.(*sendsv1.ReplyBatch)
	if !isReply || r.GetMessageId() <= 0 {
		return 0, false, nil
	}
	return r.GetMessageId(), true, nil
}
