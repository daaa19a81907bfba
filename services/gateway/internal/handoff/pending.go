package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/delivery"
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
// status accepted; delivery.ErrNotFound when it is not there.
func (p *Pending) Batch(ctx context.Context, companyID int64, batchID string) (delivery.Batch, error) {
	s, err := p.handle(ctx)
	if err != nil {
		return delivery.Batch{}, err
	}
	for _, subject := range p.cfg.PendingSubjects(companyID, batchID) {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return delivery.Batch{}, fmt.Errorf("%w: look up %s: %v", ErrUnavailable, subject, err)
		}
		return decodePending(companyID, subject, m.Data, p.cfg)
	}
	return delivery.Batch{}, delivery.ErrNotFound
}

// decodePending reads a batch waiting on subject. Its kind and source are
// bus.DescribeBatch's, as the dispatcher that records it decides them.
func decodePending(companyID int64, subject string, data []byte, cfg bus.Config) (delivery.Batch, error) {
	b := delivery.Batch{CompanyID: companyID, Status: delivery.BatchAccepted, Counts: map[delivery.State]int{}}
	for _, s := range delivery.States {
		b.Counts[s] = 0
	}
	var msg proto.Message
	var err error
	switch {
	case strings.HasPrefix(subject, cfg.CampaignSubject(companyID)+"."):
		m := &sendsv1.CampaignBatch{}
		if err = proto.Unmarshal(data, m); err == nil {
			b.ID, b.IsForced = m.BatchId, m.IsForced
			b.ContactCount = len(m.Phones)
			if m.SegmentId != 0 {
				b.ContactCount = int(m.SegmentSize)
			}
			b.AcceptedAt = m.AcceptedAt.AsTime()
			if m.ScheduledAt != nil {
				t := m.ScheduledAt.AsTime()
				b.ScheduledAt = &t
			}
		}
		msg = m
	case strings.HasPrefix(subject, cfg.AutomationSubject(companyID)+"."):
		m := &sendsv1.AutomationBatch{}
		if err = proto.Unmarshal(data, m); err == nil {
			b.ID, b.IsForced = m.BatchId, true
			b.ContactCount, b.AcceptedAt = len(m.Contacts), m.AcceptedAt.AsTime()
		}
		msg = m
	default:
		m := &sendsv1.MessageBatch{}
		if err = proto.Unmarshal(data, m); err == nil {
			b.ID, b.IsForced = m.BatchId, m.IsForced
			b.ContactCount, b.AcceptedAt = len(m.Messages), m.AcceptedAt.AsTime()
			if m.ScheduledAt != nil {
				t := m.ScheduledAt.AsTime()
				b.ScheduledAt = &t
			}
		}
		msg = m
	}
	if err == nil {
		b.Kind, b.Source, err = bus.DescribeBatch(msg)
	}
	if err != nil {
		return delivery.Batch{}, fmt.Errorf("decode pending batch on %s: %w", subject, err)
	}
	return b, nil
}
