// Package handoff puts accepted batches on the SENDS stream. A batch counts as
// accepted only once JetStream has acknowledged it; the publish is
// asynchronous so that many requests share the connection's round trips, and
// each request waits for its own acknowledgement.
package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// ErrUnavailable means the stream did not acknowledge the batch: NATS is
// unreachable, or the acknowledgement did not come in time. In the second
// case the batch may still have been stored; publishing it again with the
// same id is harmless (JetStream drops duplicates of a Nats-Msg-Id).
var ErrUnavailable = errors.New("message stream unavailable")

// Publisher publishes batches and waits for their acks.
type Publisher struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	timeout time.Duration
}

// New returns a publisher whose acks are awaited at most timeout.
func New(nc *nats.Conn, maxPending int, timeout time.Duration) (*Publisher, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Publisher{js: js, nc: nc, timeout: timeout}, nil
}

// JetStream is the context the publisher uses (for stream setup).
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// Publish sends a batch under its id and returns once the stream has it.
func (p *Publisher) Publish(ctx context.Context, subject, batchID string, m proto.Message) error {
	data, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode batch %s: %w", batchID, err)
	}
	if !p.nc.IsConnected() {
		return fmt.Errorf("%w: %s", ErrUnavailable, p.nc.Status())
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	fut, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(batchID))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	t := time.NewTimer(p.timeout)
	defer t.Stop()
	select {
	case <-fut.Ok():
		return nil
	case err := <-fut.Err():
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	case <-t.C:
		return fmt.Errorf("%w: no acknowledgement within %s", ErrUnavailable, p.timeout)
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
}
