package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/batchview"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// Pending finds a batch that the stream acknowledged but no dispatcher has
// recorded yet: it waits on its own subject (bus.PendingSubjects) until a
// dispatcher expands it into messages and acks it, which removes it. This is
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

// Batch returns the company's batch while it waits in the stream, with
// status accepted; batchview.ErrNotFound when it is not there.
func (p *Pending) Batch(ctx context.Context, companyID int64, batchID string) (batchview.Batch, error) {
	s, err := p.handle(ctx)
	if err != nil {
		return batchview.Batch{}, err
	}
	for _, subject := range p.cfg.PendingSubjects(companyID, batchID) {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return batchview.Batch{}, fmt.Errorf("%w: look up %s: %v", ErrUnavailable, subject, err)
		}
		return decodePending(companyID, subject, m.Data, p.cfg)
	}
	return batchview.Batch{}, batchview.ErrNotFound
}

// decodePending reads a batch waiting on subject: the subject says which
// batch message it is, and batchview.Pending builds the batch from it, as
// batchview.BatchStatus builds a recorded one.
func decodePending(companyID int64, subject string, data []byte, cfg bus.Config) (batchview.Batch, error) {
	var msg proto.Message
	switch {
	case strings.HasPrefix(subject, cfg.CampaignSubject(companyID)+"."):
		msg = &sendsv1.CampaignBatch{}
	case strings.HasPrefix(subject, cfg.AutomationSubject(companyID)+"."):
		msg = &sendsv1.AutomationBatch{}
	default:
		msg = &sendsv1.MessageBatch{}
	}
	err := proto.Unmarshal(data, msg)
	var b batchview.Batch
	if err == nil {
		b, err = batchview.Pending(companyID, msg)
	}
	if err != nil {
		return batchview.Batch{}, fmt.Errorf("decode pending batch on %s: %w", subject, err)
	}
	return b, nil
}
