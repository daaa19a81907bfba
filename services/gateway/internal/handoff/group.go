package handoff

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
	queue    []*entry // handed over, not yet in a group
	inFlight int      // groups awaiting their ack
}

// entry is one batch handed over for a group.
type entry struct {
	data []byte // encoded, without its id
	done chan struct{}
	// Set under the committer's lock when the entry joins a group; err is
	// set before done is closed.
	sealed bool
	id     string
	err    error
}

// commit waits until the batch's group is acknowledged and returns its id.
func (c *committer) commit(ctx context.Context, data []byte) (string, error) {
	e := &entry{data: data, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, e)
	c.flushLocked()
	c.mu.Unlock()
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

// flushLocked starts groups while fewer than GroupsInFlight are awaiting
// their ack and batches are waiting. With GroupMaxBatches 1 (the group
// commit off) every batch starts at once, however many are in flight: one
// stream message per request, as before group commit. The caller holds
// c.mu.
func (c *committer) flushLocked() {
	maxBytes := int(c.p.nc.MaxPayload()) - 1024 // room for the headers
	off := c.p.o.GroupMaxBatches == 1
	for (off || c.inFlight < c.p.o.GroupsInFlight) && len(c.queue) > 0 {
		n, size := 0, 0
		for n < len(c.queue) && n < c.p.o.GroupMaxBatches {
			next := size + bus.GroupSize(len(c.queue[n].data)+idFieldSize)
			if n > 0 && next > maxBytes {
				break
			}
			n, size = n+1, next
		}
		group := c.queue[:n:n]
		if n == len(c.queue) {
			c.queue = nil
		} else {
			c.queue = c.queue[n:]
		}
		g, err := bus.NewGroupID(time.Now())
		for i, e := range group {
			e.sealed = true
			if err == nil {
				e.id = g.BatchID(i)
			}
		}
		if err != nil {
			c.finish(group, err)
			continue
		}
		c.inFlight++
		go c.send(g, group, size)
	}
}

// idFieldSize is the encoded size of a batch_id field (a UUID's 36 bytes).
var idFieldSize = len(bus.WithBatchID(nil, "00000000-0000-0000-0000-000000000000"))

// send publishes one group and answers its batches.
func (c *committer) send(g bus.GroupID, group []*entry, size int) {
	batches := make([][]byte, len(group))
	for i, e := range group {
		batches[i] = bus.WithBatchID(e.data, e.id)
	}
	data := bus.EncodeGroup(make([]byte, 0, size), batches)
	ack, err := c.p.publish(context.Background(), c.p.cfg.GroupSubject(c.kind, g), g.String(), data)
	if err == nil && ack.Duplicate {
		// Another group had this id (odds of 2^-58): these batches are not
		// stored. The requests fail and their retries get new ids.
		err = fmt.Errorf("%w: group id %s was taken", ErrUnavailable, g)
	}
	c.p.sizes.Observe(float64(len(group)))
	c.mu.Lock()
	c.inFlight--
	c.flushLocked()
	c.mu.Unlock()
	c.finish(group, err)
}

// finish answers a group's batches.
func (c *committer) finish(group []*entry, err error) {
	for _, e := range group {
		e.err = err
		close(e.done)
	}
}
