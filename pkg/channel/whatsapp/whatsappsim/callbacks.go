package whatsappsim

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// A message's statuses go out one stage at a time: the next stage is
// queued only after the POST of the previous one succeeded, so a receiver
// sees sent before delivered before read for every message, and each
// message holds at most one place in the queue.

type cbEvent struct {
	due       int64 // unix nanoseconds
	epoch     uint64
	attempt   int
	pnid      string
	waba      string
	wamid     string
	recipient string
	status    whatsapp.Status
	// failCode is the error of a failed status (131026, 131047).
	failCode int
	// session marks a session message: billed as service.
	session bool
	// category is a template's (MARKETING, UTILITY, AUTHENTICATION): how
	// it is billed.
	category string
}

type eventHeap []cbEvent

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(cbEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// eventQueue is the bounded queue of statuses by due time.
type eventQueue struct {
	mu       sync.Mutex
	h        eventHeap
	capacity int
	wake     chan struct{}
}

func (q *eventQueue) push(e cbEvent) bool {
	q.mu.Lock()
	if len(q.h) >= q.capacity {
		q.mu.Unlock()
		return false
	}
	first := len(q.h) == 0 || e.due < q.h[0].due
	heap.Push(&q.h, e)
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// popDue takes up to n statuses that are due, or says how long until the
// next one is (-1: the queue is empty).
func (q *eventQueue) popDue(now int64, n int) ([]cbEvent, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []cbEvent
	for len(q.h) > 0 && len(out) < n {
		if q.h[0].due > now {
			if len(out) == 0 {
				return nil, time.Duration(q.h[0].due - now)
			}
			break
		}
		out = append(out, heap.Pop(&q.h).(cbEvent))
	}
	if len(out) == 0 {
		return nil, -1
	}
	return out, 0
}

func (q *eventQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h)
}

func (q *eventQueue) clear() {
	q.mu.Lock()
	q.h = nil
	q.mu.Unlock()
}

// callbacks posts status webhooks: one scheduler hands due statuses in
// batches to a few workers.
type callbacks struct {
	s       *Sim
	cfg     CallbackConfig
	queue   *eventQueue
	batches chan []cbEvent
	epoch   atomic.Uint64
	client  *http.Client
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	posts, failedPosts, statuses, droppedFull, droppedGaveUp atomic.Int64
}

func newCallbacks(s *Sim, cfg CallbackConfig) *callbacks {
	ctx, cancel := context.WithCancel(context.Background())
	return &callbacks{
		s:       s,
		cfg:     cfg,
		queue:   &eventQueue{capacity: cfg.QueueSize, wake: make(chan struct{}, 1)},
		batches: make(chan []cbEvent, cfg.Workers),
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: cfg.Workers,
			IdleConnTimeout:     90 * time.Second,
		}},
		ctx:    ctx,
		cancel: cancel,
	}
}

func (c *callbacks) start() {
	c.wg.Add(1 + c.cfg.Workers)
	go c.schedule()
	for range c.cfg.Workers {
		go c.work()
	}
}

func (c *callbacks) stop() {
	c.cancel()
	c.wg.Wait()
	c.client.CloseIdleConnections()
}

// accepted queues the first status of an accepted send: failed with
// failCode (131026 for an undeliverable number, 131047 outside the
// customer service window, 131049 or the rules' code past a limit) when
// it is not zero, else sent. Nothing is queued while callbacks are off.
func (c *callbacks) accepted(acc *account, wamid, recipient string, failCode int, session bool, category string, now time.Time) {
	set := c.s.cbSet.Load()
	if set.URL == "" {
		return
	}
	st := whatsapp.StatusSent
	if failCode != 0 {
		st = whatsapp.StatusFailed
	}
	c.enqueue(cbEvent{
		due: now.Add(set.SentDelay).UnixNano(), epoch: c.epoch.Load(),
		pnid: acc.id, waba: acc.waba, wamid: wamid, recipient: recipient, status: st,
		failCode: failCode, session: session, category: category,
	})
}

func (c *callbacks) enqueue(e cbEvent) {
	if e.epoch != c.epoch.Load() {
		return // queued before a Reset
	}
	if !c.queue.push(e) {
		c.droppedFull.Add(1)
		c.s.m.callbackDrops.WithLabelValues("queue_full").Inc()
	}
}

func (c *callbacks) reset() {
	c.epoch.Add(1)
	c.queue.clear()
	c.posts.Store(0)
	c.failedPosts.Store(0)
	c.statuses.Store(0)
	c.droppedFull.Store(0)
	c.droppedGaveUp.Store(0)
}

func (c *callbacks) stats() CallbackStats {
	return CallbackStats{
		Queued:           c.queue.len(),
		Posts:            c.posts.Load(),
		FailedPosts:      c.failedPosts.Load(),
		Statuses:         c.statuses.Load(),
		DroppedQueueFull: c.droppedFull.Load(),
		DroppedGaveUp:    c.droppedGaveUp.Load(),
	}
}

func (c *callbacks) schedule() {
	defer c.wg.Done()
	defer close(c.batches)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, wait := c.queue.popDue(time.Now().UnixNano(), c.cfg.BatchSize)
		if len(batch) > 0 {
			select {
			case c.batches <- batch:
			case <-c.ctx.Done():
				return
			}
			continue
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-c.queue.wake:
			timer.Stop() // since Go 1.23 no stale tick is left to drain
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *callbacks) work() {
	defer c.wg.Done()
	for batch := range c.batches {
		c.deliver(batch)
	}
}

// deliver posts one batch and queues what follows each status.
func (c *callbacks) deliver(batch []cbEvent) {
	set := c.s.cbSet.Load()
	if set.URL == "" {
		return // turned off while queued
	}
	epoch := c.epoch.Load()
	live := batch[:0]
	for _, e := range batch {
		if e.epoch == epoch {
			live = append(live, e)
		}
	}
	if batch = live; len(batch) == 0 {
		return // reset while queued
	}
	body, err := json.Marshal(payload(batch, time.Now()))
	if err != nil {
		c.s.log.Error("encode status webhook", zap.Error(err))
		return
	}
	if err := c.post(set, body); err != nil {
		c.failedPosts.Add(1)
		c.s.m.callbackPosts.WithLabelValues("error").Inc()
		c.s.log.Warn("status webhook failed", zap.Int("statuses", len(batch)), zap.Error(err))
		for _, e := range batch {
			e.attempt++
			if e.attempt >= c.cfg.MaxAttempts {
				c.droppedGaveUp.Add(1)
				c.s.m.callbackDrops.WithLabelValues("gave_up").Inc()
				continue
			}
			e.due = time.Now().Add(time.Duration(e.attempt) * 200 * time.Millisecond).UnixNano()
			c.enqueue(e)
		}
		return
	}
	c.posts.Add(1)
	c.statuses.Add(int64(len(batch)))
	c.s.m.callbackPosts.WithLabelValues("ok").Inc()
	now := time.Now()
	for _, e := range batch {
		c.s.m.callbackStatus.WithLabelValues(string(e.status)).Inc()
		next := e
		next.attempt = 0
		switch e.status {
		case whatsapp.StatusSent:
			next.status, next.due = whatsapp.StatusDelivered, now.Add(set.DeliveredDelay).UnixNano()
			if !set.NoRead && set.ReadAtOnce > 0 && rand.Float64() < set.ReadAtOnce {
				next.status = whatsapp.StatusRead
			}
		case whatsapp.StatusDelivered:
			if set.NoRead {
				continue
			}
			next.status, next.due = whatsapp.StatusRead, now.Add(set.ReadDelay).UnixNano()
		default:
			continue
		}
		c.enqueue(next)
	}
}

func (c *callbacks) post(set *CallbackSettings, body []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, set.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(whatsapp.SignatureHeader, whatsapp.Sign(set.AppSecret, body))
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &statusError{code: resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "receiver answered HTTP " + strconv.Itoa(e.code) }

// payload builds the real webhook body: one entry per phone number (with
// its account's WABA id; the phone number id stands in for the display
// number, which the simulator does not know), each with its statuses in
// batch order.
func payload(batch []cbEvent, now time.Time) whatsapp.WebhookPayload {
	ts := strconv.FormatInt(now.Unix(), 10)
	p := whatsapp.WebhookPayload{Object: whatsapp.WebhookObject}
	index := map[string]int{}
	for _, e := range batch {
		i, ok := index[e.pnid]
		if !ok {
			i = len(p.Entry)
			index[e.pnid] = i
			p.Entry = append(p.Entry, whatsapp.WebhookEntry{
				ID: e.waba,
				Changes: []whatsapp.WebhookChange{{
					Field: "messages",
					Value: whatsapp.WebhookValue{
						MessagingProduct: whatsapp.MessagingProduct,
						Metadata:         whatsapp.WebhookMetadata{DisplayPhoneNumber: e.pnid, PhoneNumberID: e.pnid},
					},
				}},
			})
		}
		ws := whatsapp.WebhookStatus{ID: e.wamid, Status: string(e.status), Timestamp: ts, RecipientID: e.recipient}
		switch e.status {
		case whatsapp.StatusFailed:
			ws.Errors = []whatsapp.WebhookError{failedStatusError(e.failCode)}
		case whatsapp.StatusSent, whatsapp.StatusDelivered, whatsapp.StatusRead:
			// Every status carries the pricing (per-message pricing,
			// July 2025): a template is billed in its category; a session
			// message inside the window is a free service message.
			category := categoryPricing(e.category)
			pricing := &whatsapp.WebhookPricing{Billable: true, PricingModel: "PMP", Category: category, Type: "regular"}
			if e.session {
				category, pricing = "service", &whatsapp.WebhookPricing{Billable: false, PricingModel: "PMP", Category: "service", Type: "free_customer_service"}
			}
			conv := &whatsapp.WebhookConversation{ID: conversationID(e.pnid, e.recipient), Origin: map[string]string{"type": category}}
			if e.status == whatsapp.StatusSent {
				conv.ExpirationTimestamp = strconv.FormatInt(now.Add(24*time.Hour).Unix(), 10)
			}
			ws.Conversation = conv
			ws.Pricing = pricing
		}
		v := &p.Entry[i].Changes[0].Value
		v.Statuses = append(v.Statuses, ws)
	}
	return p
}

// failedStatusError is the error of a failed status, as the Cloud API words it.
func failedStatusError(code int) whatsapp.WebhookError {
	const href = "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
	switch code {
	case codeReengagement:
		return whatsapp.WebhookError{
			Code: codeReengagement, Title: "Re-engagement message", Message: "Re-engagement message",
			ErrorData: &whatsapp.WebhookErrorData{Details: reengagementDetails}, Href: href,
		}
	case 131026:
		return whatsapp.WebhookError{
			Code: 131026, Title: "Message undeliverable", Message: "Message undeliverable",
			ErrorData: &whatsapp.WebhookErrorData{Details: "Message Undeliverable."}, Href: href,
		}
	case codeMarketingLimit:
		return whatsapp.WebhookError{
			Code: code, Title: marketingLimitTitle, Message: marketingLimitTitle,
			ErrorData: &whatsapp.WebhookErrorData{Details: marketingLimitDetails}, Href: href,
		}
	}
	// Past the messaging limit with the code the rules chose.
	return whatsapp.WebhookError{
		Code: code, Title: messagingLimitTitle, Message: messagingLimitTitle,
		ErrorData: &whatsapp.WebhookErrorData{Details: messagingLimitDetails}, Href: href,
	}
}

// conversationID is stable per (number, recipient), as a conversation is.
func conversationID(pnid, recipient string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(pnid))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(recipient))
	return strconv.FormatUint(h.Sum64(), 16)
}
