package accept

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
)

// committer is the group commit of one kind of batch.
type committer struct {
	p    *Publisher
	kind string

	mu       sync.Mutex
	queue    []*entry // published, not yet in a group
	inFlight int      // groups awaiting their ack
}

// entry is one batch waiting for a group.
type entry struct {
	data []byte // encoded, without its id
	done chan struct{}
	// Set under the committer's lock when the entry joins a group; err is
	// set before done is closed.
	sealed bool
	id     string
	err    error
}

// group is one stream message of batches.
type group struct {
	id      bus.GroupID
	entries []*entry
	size    int
}

// commit waits until the batch's group is acknowledged and returns its id.
// The request that starts a group holding its own batch publishes it
// itself: with nothing in flight a lone batch goes at once, with no other
// goroutine between the request and its publish.
func (c *committer) commit(ctx context.Context, data []byte) (string, error) {
	if c.p.o.GroupMaxBatches == 1 {
		return c.alone(ctx, data)
	}
	e := &entry{data: data, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, e)
	started := c.startLocked()
	c.mu.Unlock()
	for _, g := range started {
		if g.entries[len(g.entries)-1] == e {
			c.send(g)
		} else {
			go c.send(g)
		}
	}
	select {
	case <-e.done:
		return e.id, e.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.sealed {
		// Still waiting for a group: it never reaches the stream.
		for i, q := range c.queue {
			if q == e {
				c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
				break
			}
		}
		return "", fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
	// On its way in a group: the answer is in doubt.
	return e.id, fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
}

// alone publishes one batch as a group of its own, at once, in the
// caller's goroutine: the group commit off (GroupMaxBatches 1), one stream
// message per request as before it.
func (c *committer) alone(ctx context.Context, data []byte) (string, error) {
	g, err := c.p.newGroupID(time.Now())
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	id := g.BatchID(0)
	return id, c.publish(ctx, g, bus.EncodeGroup(nil, [][]byte{bus.WithBatchID(data, id)}), 1)
}

// publish sends a group of n batches as one stream message under its id
// and waits for the ack. A duplicate means another group had this id (odds
// of 2^-58): these batches are not stored, and their requests fail (their
// retries get new ids).
func (c *committer) publish(ctx context.Context, g bus.GroupID, data []byte, n int) error {
	ack, err := c.p.publish(ctx, c.p.cfg.GroupSubject(c.kind, g), g.String(), data)
	if err == nil && ack.Duplicate {
		err = fmt.Errorf("%w: group id %s was taken", ErrUnavailable, g)
	}
	c.p.sizes.Observe(float64(n))
	return err
}

// startLocked seals groups while fewer than GroupsInFlight are awaiting
// their ack and batches are waiting, and returns them to be sent. The
// caller holds c.mu.
func (c *committer) startLocked() []*group {
	var started []*group
	maxBytes := int(c.p.nc.MaxPayload()) - 1024 // room for the headers
	for c.inFlight < c.p.o.GroupsInFlight && len(c.queue) > 0 {
		n, size := 0, 0
		for n < len(c.queue) && n < c.p.o.GroupMaxBatches {
			next := size + bus.GroupSize(len(c.queue[n].data)+idFieldSize)
			if n > 0 && next > maxBytes {
				break
			}
			n, size = n+1, next
		}
		entries := c.queue[:n:n]
		if n == len(c.queue) {
			c.queue = nil
		} else {
			c.queue = c.queue[n:]
		}
		id, err := c.p.newGroupID(time.Now())
		for i, e := range entries {
			e.sealed = true
			if err == nil {
				e.id = id.BatchID(i)
			}
		}
		if err != nil {
			finish(entries, fmt.Errorf("%w: %v", ErrUnavailable, err))
			continue
		}
		c.inFlight++
		started = append(started, &group{id: id, entries: entries, size: size})
	}
	return started
}

// idFieldSize is the encoded size of a batch_id field (a UUID's 36 bytes).
var idFieldSize = len(bus.WithBatchID(nil, "00000000-0000-0000-0000-000000000000"))

// send publishes one group, starts the groups that waited for it (in
// goroutines of their own) and answers its batches.
func (c *committer) send(g *group) {
	batches := make([][]byte, len(g.entries))
	for i, e := range g.entries {
		batches[i] = bus.WithBatchID(e.data, e.id)
	}
	err := c.publish(context.Background(), g.id, bus.EncodeGroup(make([]byte, 0, g.size), batches), len(g.entries))
	c.mu.Lock()
	c.inFlight--
	next := c.startLocked()
	c.mu.Unlock()
	for _, n := range next {
		go c.send(n)
	}
	finish(g.entries, err)
}

// finish answers a group's batches.
func finish(entries []*entry, err error) {
	for _, e := range entries {
		e.err = err
		close(e.done)
	}
}
