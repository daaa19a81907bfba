// Package accept makes a send's batch accepted: it puts the batch on the
// SENDS stream, and a batch counts as accepted (the API answers 202) only
// once JetStream has acknowledged it.
//
// A new batch is committed in a group (bus.GroupID): the batches of one kind
// that requests publish while an earlier group of that kind is being
// stored go together in the next stream message, and each request is
// answered when the group it is in is acknowledged. Nothing waits for a
// group to fill: with no group in flight a batch is published at once, on
// its own, so a lone request pays no window; under load a group holds what
// arrived during one store, so its size follows the load. Each stream
// message, and with sync_interval always each flush to disk, then serves a
// whole group. A batch whose id is already known (an Idempotency-Key retry
// of a publish that ended in doubt) is published alone, on its own subject,
// under its id.
package accept

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
)

// ErrUnavailable means the stream did not acknowledge the batch: NATS is
// unreachable, or the acknowledgement did not come in time. In the second
// case the batch may still have been stored; publishing it again under the
// same id is harmless: JetStream drops a duplicate published alone, and a
// dispatcher expands a batch id once however many messages carry it.
var ErrUnavailable = errors.New("message stream unavailable")

// Options shape a Publisher.
type Options struct {
	// MaxPending caps unacknowledged asynchronous publishes.
	MaxPending int
	// Timeout bounds the wait for a publish's acknowledgement.
	Timeout time.Duration
	// GroupsInFlight is how many groups of one kind may be awaiting their
	// acknowledgement at once; batches published meanwhile wait for the
	// next group. 1 makes the largest groups.
	GroupsInFlight int
	// GroupMaxBatches caps the batches of one group (at most bus.MaxGroup);
	// 1 turns the group commit off: each batch is published at once in a
	// stream message of its own, however many are in flight.
	GroupMaxBatches int
}

// Publisher publishes batches and waits for their acks.
type Publisher struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg bus.Config
	o   Options

	groups map[string]*committer
	sizes  prometheus.Histogram
	// newGroupID is bus.NewGroupID (a test may draw the same id twice).
	newGroupID func(time.Time) (bus.GroupID, error)
}

// New returns a publisher on cfg's subjects.
func New(nc *nats.Conn, cfg bus.Config, o Options) (*Publisher, error) {
	if o.GroupsInFlight < 1 || o.GroupMaxBatches < 1 || o.GroupMaxBatches > bus.MaxGroup || o.Timeout <= 0 {
		return nil, fmt.Errorf("accept options %+v", o)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(o.MaxPending))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p := &Publisher{js: js, nc: nc, cfg: cfg, o: o, groups: map[string]*committer{}, newGroupID: bus.NewGroupID,
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_gateway_group_batches",
			Help:    "Batches committed per stream message (the gateway's group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		})}
	for _, kind := range bus.SubjectKinds {
		p.groups[kind] = &committer{p: p, kind: kind}
	}
	return p, nil
}

// Collector is the publisher's metric: parley_gateway_group_batches, the
// batches per stream message.
func (p *Publisher) Collector() prometheus.Collector { return p.sizes }

// JetStream is the context the publisher uses (for stream setup).
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// Publish puts a company's batch of a subject kind (bus.KindCampaignBatches
// and so on) on the stream and returns its id once the stream has it. With
// batchID empty the batch is committed in a group, which gives it its id; m
// must not set one. Otherwise m carries batchID and is published alone. The
// id is returned with ErrUnavailable too when the batch may be in the
// stream (the acknowledgement did not come), so that a retry can reuse it.
func (p *Publisher) Publish(ctx context.Context, kind string, companyID int64, batchID string, m bus.BatchMessage) (string, error) {
	// A known id stays with every answer: the batch may be in the stream
	// from the earlier attempt, and the next retry must reuse the id.
	c := p.groups[kind]
	if c == nil {
		return batchID, fmt.Errorf("publish: no batch kind %q", kind)
	}
	data, err := proto.Marshal(m)
	if err != nil {
		return batchID, fmt.Errorf("encode batch: %w", err)
	}
	if !p.nc.IsConnected() {
		return batchID, fmt.Errorf("%w: %s", ErrUnavailable, p.nc.Status())
	}
	if batchID != "" {
		subject := bus.ForBatch(p.cfg.CompanySubject(kind, companyID), batchID)
		// Stored already (the doubtful publish was, after all): JetStream
		// acknowledges the duplicate, and that is the answer.
		_, err := p.publish(ctx, subject, batchID, data)
		return batchID, err
	}
	return c.commit(ctx, data)
}

// publish sends one stream message under msgID and waits for its ack.
func (p *Publisher) publish(ctx context.Context, subject, msgID string, data []byte) (*jetstream.PubAck, error) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	fut, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(msgID))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	t := time.NewTimer(p.o.Timeout)
	defer t.Stop()
	select {
	case ack := <-fut.Ok():
		return ack, nil
	case err := <-fut.Err():
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case <-t.C:
		return nil, fmt.Errorf("%w: no acknowledgement within %s", ErrUnavailable, p.o.Timeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
}
