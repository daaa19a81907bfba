package whatsappsim

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// The WhatsApp Business Account webhooks that are not about messages
// (template status, quality and category; a number's messaging limit) go
// to the same callback URL as the statuses, signed the same way, one POST
// per change set. One worker posts them in order, so that a receiver sees
// PENDING's APPROVED before the PAUSED that follows it.

// accountQueueSize bounds the account webhooks waiting to be posted; they
// are rare (an admin call or a template's timer each).
const accountQueueSize = 4096

// accountChange is one change of one WhatsApp Business Account.
type accountChange struct {
	waba  string
	field string
	value any
}

type pendingNote struct {
	epoch   uint64
	body    []byte
	changes int
}

// notifier posts account webhooks in order.
type notifier struct {
	s     *Sim
	mu    sync.Mutex
	queue []pendingNote
	wake  chan struct{}
	epoch atomic.Uint64

	posts, failedPosts, changes, dropped atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newNotifier(s *Sim) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{s: s, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

func (n *notifier) start() {
	n.wg.Add(1)
	go n.run()
}

func (n *notifier) stop() {
	n.cancel()
	n.wg.Wait()
}

// send queues changes as one webhook: one entry per account, in the order
// the accounts first appear. Nothing is queued while callbacks are off.
func (n *notifier) send(now time.Time, changes ...accountChange) {
	if len(changes) == 0 || n.s.cbSet.Load().URL == "" {
		return
	}
	p := whatsapp.AccountWebhook{Object: whatsapp.WebhookObject}
	index := map[string]int{}
	for _, c := range changes {
		v, err := json.Marshal(c.value)
		if err != nil {
			n.s.log.Error("encode account webhook", zap.String("field", c.field), zap.Error(err))
			continue
		}
		i, ok := index[c.waba]
		if !ok {
			i = len(p.Entry)
			index[c.waba] = i
			p.Entry = append(p.Entry, whatsapp.AccountWebhookEntry{ID: c.waba, Time: now.Unix()})
		}
		p.Entry[i].Changes = append(p.Entry[i].Changes, whatsapp.AccountWebhookChange{Value: v, Field: c.field})
	}
	body, err := json.Marshal(p)
	if err != nil {
		n.s.log.Error("encode account webhook", zap.Error(err))
		return
	}
	n.mu.Lock()
	if len(n.queue) >= accountQueueSize {
		n.mu.Unlock()
		n.dropped.Add(int64(len(changes)))
		return
	}
	n.queue = append(n.queue, pendingNote{epoch: n.epoch.Load(), body: body, changes: len(changes)})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) pop() (pendingNote, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) == 0 {
		return pendingNote{}, false
	}
	p := n.queue[0]
	n.queue[0] = pendingNote{}
	n.queue = n.queue[1:]
	return p, true
}

func (n *notifier) run() {
	defer n.wg.Done()
	for {
		p, ok := n.pop()
		if !ok {
			select {
			case <-n.wake:
				continue
			case <-n.ctx.Done():
				return
			}
		}
		n.deliver(p)
		if n.ctx.Err() != nil {
			return
		}
	}
}

// deliver posts one webhook, retrying as the status callbacks do; later
// webhooks wait, so that their order holds.
func (n *notifier) deliver(p pendingNote) {
	cb := n.s.cb
	for attempt := 1; ; attempt++ {
		set := n.s.cbSet.Load()
		if p.epoch != n.epoch.Load() || set.URL == "" {
			return // reset, or callbacks turned off, while queued
		}
		err := cb.post(set, p.body)
		if err == nil {
			n.posts.Add(1)
			n.changes.Add(int64(p.changes))
			return
		}
		n.failedPosts.Add(1)
		n.s.log.Warn("account webhook failed", zap.Int("attempt", attempt), zap.Error(err))
		if attempt >= cb.cfg.MaxAttempts {
			n.dropped.Add(int64(p.changes))
			return
		}
		t := time.NewTimer(time.Duration(attempt) * 200 * time.Millisecond)
		select {
		case <-t.C:
		case <-n.ctx.Done():
			t.Stop()
			return
		}
	}
}

func (n *notifier) reset() {
	n.epoch.Add(1)
	n.mu.Lock()
	n.queue = nil
	n.mu.Unlock()
	n.posts.Store(0)
	n.failedPosts.Store(0)
	n.changes.Store(0)
	n.dropped.Store(0)
}

// AccountWebhookStats count the account webhooks (template status, quality
// and category; messaging limit).
type AccountWebhookStats struct {
	// Queued is how many webhooks wait now.
	Queued int `json:"queued"`
	// Posts and FailedPosts count the POSTs; Changes the changes that
	// reached the receiver; Dropped those given up on (queue full, or
	// MaxAttempts failed POSTs).
	Posts       int64 `json:"posts"`
	FailedPosts int64 `json:"failed_posts"`
	Changes     int64 `json:"changes"`
	Dropped     int64 `json:"dropped"`
}

func (n *notifier) stats() AccountWebhookStats {
	n.mu.Lock()
	q := len(n.queue)
	n.mu.Unlock()
	return AccountWebhookStats{Queued: q, Posts: n.posts.Load(), FailedPosts: n.failedPosts.Load(), Changes: n.changes.Load(), Dropped: n.dropped.Load()}
}

// wabas lists the WhatsApp Business Account ids of the served numbers,
// each once, sorted.
func (s *Sim) wabas() []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range *s.accounts.Load() {
		if !seen[a.waba] {
			seen[a.waba] = true
			out = append(out, a.waba)
		}
	}
	sort.Strings(out)
	return out
}
