package record_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/record"
)

// sentMessages expands a campaign batch of n messages, claims them and
// records each sent with the wamid "wamid.<prefix>.<i>", as a dispatcher
// does; it returns the wamids.
func (f *fixture) sentMessages(prefix string, n int) []string {
	f.t.Helper()
	f.expand(f.campaignBatch(n, nil))
	claimed, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, n, f.now, false)
	if err != nil || len(claimed) != n {
		f.t.Fatalf("claim: %d of %d, %v", len(claimed), n, err)
	}
	wamids := make([]string, n)
	outs := make([]record.Outcome, n)
	for i, c := range claimed {
		wamids[i] = fmt.Sprintf("wamid.%s.%d", prefix, i)
		outs[i] = record.Outcome{Kind: record.OutcomeSent, ID: c.ID, BatchID: c.BatchID, ClaimedAt: c.ClaimedAt,
			Wamid: wamids[i], At: f.now}
	}
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		f.t.Fatal(err)
	}
	return wamids
}

// messageEvents counts the company's message events in the outbox by wamid
// and type, and says whether any delivered one was written after its
// read (the outbox's seq is the order of writing).
func (f *fixture) messageEvents() (counts map[string]map[events.Type]int, backwards []string) {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT type, data FROM event_outbox WHERE company_id = $1 AND type LIKE 'message.%' ORDER BY seq`, f.comp.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	counts = map[string]map[events.Type]int{}
	for rows.Next() {
		var typ string
		var data []byte
		if err := rows.Scan(&typ, &data); err != nil {
			f.t.Fatal(err)
		}
		var m events.Message
		if err := json.Unmarshal(data, &m); err != nil {
			f.t.Fatal(err)
		}
		if counts[m.ProviderMessageID] == nil {
			counts[m.ProviderMessageID] = map[events.Type]int{}
		}
		t := events.Type(typ)
		if t == events.MessageDelivered && counts[m.ProviderMessageID][events.MessageRead] > 0 {
			backwards = append(backwards, m.ProviderMessageID)
		}
		counts[m.ProviderMessageID][t]++
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return counts, backwards
}

func status(wamid string, s whatsapp.Status, at time.Time) whatsapp.StatusUpdate {
	return whatsapp.StatusUpdate{MessageID: wamid, Status: s, Timestamp: at,
		Pricing: &whatsapp.Pricing{Billable: true, Category: "marketing", Model: "PMP"}}
}

// TestApplyStatusesGroupsAtOnce applies many groups at once whose wamids
// overlap, each group in another order (one wamid's delivered and read in
// two groups in flight together, in either order): no group fails (two
// groups locking the same messages in opposite orders would deadlock), no
// message moves backwards, each ends read with its delivered time, and
// each has exactly one message.delivered and one message.read event,
// none written after its read.
func TestApplyStatusesGroupsAtOnce(t *testing.T) {
	f := newFixture(t)
	const n, groups = 300, 24
	wamids := f.sentMessages("g", n)
	moves := f.watchMoves()
	deliveredAt, readAt := f.now.Add(time.Second), f.now.Add(2*time.Second)
	var all [][]whatsapp.StatusUpdate
	for g := range groups {
		// Group g names every k-th message from its own start (k from 1
		// to 5): groups of several sizes that overlap on most wamids.
		var u []whatsapp.StatusUpdate
		k := 1 + g%5
		for i := g % k; i < n; i += k {
			s, at := whatsapp.StatusDelivered, deliveredAt
			if (g+i)%2 == 0 {
				s, at = whatsapp.StatusRead, readAt
			}
			u = append(u, status(wamids[i], s, at))
		}
		r := rand.New(rand.NewPCG(uint64(g), 7))
		r.Shuffle(len(u), func(i, j int) { u[i], u[j] = u[j], u[i] })
		all = append(all, u)
	}
	// With sorting off the planner groups the statuses by hash, and
	// joins in that order: the lock order must not depend on the plan.
	cfg := f.pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["enable_sort"] = "off"
	cfg.MaxConns = groups
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conns := make([]*pgxpool.Conn, groups) // every group's connection ready at the start
	for i := range conns {
		if conns[i], err = pool.Acquire(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Release()
	}
	var wg sync.WaitGroup
	errs := make([]error, groups)
	start := make(chan struct{})
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[g] = record.ApplyStatuses(f.ctx, pool, all[g], f.now)
		}()
	}
	close(start)
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("group %d: %v", g, err)
		}
	}
	var notRead int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM messages WHERE company_id = $1
		AND NOT (state = 'read' AND delivered_at IS NOT NULL AND read_at = $2)`, f.comp.ID, readAt).Scan(&notRead); err != nil {
		t.Fatal(err)
	}
	if notRead != 0 {
		t.Errorf("%d of %d messages are not read with their delivered and read times", notRead, n)
	}
	for move, c := range moves() {
		var from, to record.State
		fmt.Sscanf(move, "%s -> %s", &from, &to)
		if !record.CanMove(from, to) {
			t.Errorf("%d message(s) moved %s", c, move)
		}
	}
	counts, backwards := f.messageEvents()
	for _, w := range wamids {
		if c := counts[w]; c[events.MessageDelivered] != 1 || c[events.MessageRead] != 1 {
			t.Errorf("%s: events %v, want one message.delivered and one message.read", w, c)
		}
	}
	if len(backwards) > 0 {
		t.Errorf("message.delivered written after message.read for %v", backwards)
	}
	f.countersMatchRecord()
}

// TestApplyStatusesOrderAndDuplicates: one wamid several times in one
// group counts once; a read before its delivered (in separate calls) ends
// read with a delivered time, and the late delivered changes nothing and
// announces nothing; a repeated call changes nothing.
func TestApplyStatusesOrderAndDuplicates(t *testing.T) {
	f := newFixture(t)
	w := f.sentMessages("o", 3)
	d, r := f.now.Add(time.Second), f.now.Add(2*time.Second)
	apply := func(u ...whatsapp.StatusUpdate) record.ApplyResult {
		t.Helper()
		res, err := record.ApplyStatuses(f.ctx, f.pool, u, f.now)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// 0: delivered three times and read twice, in one group.
	if res := apply(status(w[0], whatsapp.StatusDelivered, d), status(w[0], whatsapp.StatusRead, r),
		status(w[0], whatsapp.StatusDelivered, d), status(w[0], whatsapp.StatusRead, r),
		status(w[0], whatsapp.StatusDelivered, d)); res.Applied != 1 {
		t.Errorf("duplicates in one group: applied %d, want 1", res.Applied)
	}
	// 1: read, then delivered; 2: delivered, then read.
	apply(status(w[1], whatsapp.StatusRead, r))
	if res := apply(status(w[1], whatsapp.StatusDelivered, d)); res.Applied != 0 {
		t.Errorf("a delivered after read: applied %d, want 0", res.Applied)
	}
	apply(status(w[2], whatsapp.StatusDelivered, d))
	apply(status(w[2], whatsapp.StatusRead, r))
	// Everything again: nothing moves.
	if res := apply(status(w[0], whatsapp.StatusRead, r), status(w[1], whatsapp.StatusRead, r), status(w[2], whatsapp.StatusRead, r),
		status(w[2], whatsapp.StatusDelivered, d)); res.Applied != 0 || res.Backlogged != 0 {
		t.Errorf("repeated: %+v, want nothing applied or kept", res)
	}
	for i, want := range []time.Time{d, r, d} {
		var state string
		var delivered, read time.Time
		if err := f.pool.QueryRow(f.ctx, `SELECT state::text, delivered_at, read_at FROM messages WHERE provider_message_id = $1`,
			w[i]).Scan(&state, &delivered, &read); err != nil {
			t.Fatal(err)
		}
		if state != "read" || !delivered.Equal(want) || !read.Equal(r) {
			t.Errorf("%s: %s, delivered %s, read %s; want read, delivered %s", w[i], state, delivered, read, want)
		}
	}
	counts, backwards := f.messageEvents()
	for _, x := range w {
		if c := counts[x]; c[events.MessageDelivered] != 1 || c[events.MessageRead] != 1 {
			t.Errorf("%s: events %v, want one message.delivered and one message.read", x, c)
		}
	}
	if len(backwards) > 0 {
		t.Errorf("message.delivered written after message.read for %v", backwards)
	}
	f.countersMatchRecord()
}
