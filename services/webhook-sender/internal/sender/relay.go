package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// StreamEvent is an event as it travels on the EVENTS stream: the outbox
// row.
type StreamEvent struct {
	ID         string          `json:"id"`
	CompanyID  int64           `json:"company_id"`
	Type       string          `json:"type"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data"`
}

// Subject is where the relay publishes a company's events.
func Subject(prefix string, companyID int64) string {
	return prefix + ".outbox." + strconv.FormatInt(companyID, 10)
}

// Filter matches every company's events.
func Filter(prefix string) string { return prefix + ".outbox.>" }

// EnsureStream creates or updates the EVENTS stream: work-queue retention
// (an event leaves once the sender has made its deliveries), file storage,
// and a duplicate window that makes a relay's republish of a row it
// published but could not delete (a crash, PostgreSQL gone) harmless: the
// Nats-Msg-Id is the event id.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name, prefix string, replicas int) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "Events from the outbox awaiting the webhook sender",
		Subjects:    []string{Filter(prefix)},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  10 * time.Minute,
		Discard:     jetstream.DiscardNew,
		MaxAge:      7 * 24 * time.Hour,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", name, err)
	}
	return s, nil
}

// relaySQL takes the oldest outbox rows no other relay holds; the rows stay
// locked until they are deleted, after JetStream acked every publish.
const relaySQL = `
SELECT id::text, company_id, type, occurred_at, data FROM event_outbox
ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`

// relayOnce moves up to RelayBatch outbox rows to the stream in one
// transaction and returns how many it moved.
func (s *Sender) relayOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, relaySQL, s.cfg.RelayBatch)
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StreamEvent, error) {
			var e StreamEvent
			err := r.Scan(&e.ID, &e.CompanyID, &e.Type, &e.OccurredAt, &e.Data)
			return e, err
		})
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		futures := make([]jetstream.PubAckFuture, 0, len(evs))
		ids := make([]string, 0, len(evs))
		for _, e := range evs {
			body, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("encode event %s: %w", e.ID, err)
			}
			msg := &nats.Msg{Subject: Subject(s.prefix, e.CompanyID), Data: body, Header: nats.Header{}}
			f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID))
			if err != nil {
				return fmt.Errorf("publish event %s: %w", e.ID, err)
			}
			futures = append(futures, f)
			ids = append(ids, e.ID)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("publish event: %w", err)
			case <-ctx.Done():
				return fmt.Errorf("publish events: %w", ctx.Err())
			}
		}
		// Only now: every event is in the stream.
		if _, err := tx.Exec(ctx, `DELETE FROM event_outbox WHERE id = ANY($1::uuid[])`, ids); err != nil {
			return fmt.Errorf("delete relayed events: %w", err)
		}
		n = len(evs)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// relay runs relay passes until ctx ends: at once again after a full pass,
// else after RelayInterval.
func (s *Sender) relay(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		n, err := s.relayOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			s.m.relayFailures.Inc()
			s.warn("relay events to the stream; retrying", zap.Int("failures", failures), zap.Error(err))
			sleep(ctx, min(time.Duration(failures)*100*time.Millisecond, 2*time.Second))
			continue
		}
		failures = 0
		s.m.relayed.Add(float64(n))
		if n < s.cfg.RelayBatch {
			sleep(ctx, s.cfg.RelayInterval)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
