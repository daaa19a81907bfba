package webhooks_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/webhooks"
)

func TestEventTime(t *testing.T) {
	at := time.Date(2026, 11, 29, 23, 59, 59, 123_000_000, time.UTC)
	id := uuid.Must(uuid.NewV7())
	binary.BigEndian.PutUint16(id[0:2], uint16(at.UnixMilli()>>32))
	binary.BigEndian.PutUint32(id[2:6], uint32(at.UnixMilli()))
	occurred := at.AddDate(0, 0, -8) // another week: a provider's late timestamp
	for _, c := range []struct {
		name, id string
		want     time.Time
	}{
		{"a UUIDv7: its time, whatever the occurred_at", id.String(), at},
		{"a UUIDv4: the occurred_at", "6f1c1c3e-5d2a-4b1e-9c4f-2a7d3b9e8c01", occurred},
		{"not a UUID: the occurred_at", "evt-1", occurred},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := webhooks.EventTime(c.id, occurred); !got.Equal(c.want) {
				t.Errorf("EventTime(%s) = %s, want %s", c.id, got, c.want)
			}
		})
	}
}

// TestErasePhoneTakesTheAttempts: an erasure deletes the deliveries whose
// event names the phone with their attempts (no foreign key cascades to
// them since the tables are partitioned), and leaves the others.
func TestErasePhoneTakesTheAttempts(t *testing.T) {
	ctx := context.Background()
	s, pool, company, clk := newStore(t, webhooks.DefaultConfig())
	_, ep, err := s.Create(ctx, company, webhooks.Input{URL: "https://hooks.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := s.SendTest(ctx, company, ep.ID, "message.sent") // its sample data names +15550000000
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.SendTest(ctx, company, ep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	code := 500
	for _, d := range []webhooks.Delivery{named, other, named} {
		retry := clk.Now().Add(time.Minute)
		if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: d.ID, ResponseCode: &code, At: clk.Now(), NextAttemptAt: &retry}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := webhooks.ErasePhone(ctx, pool, company, "+15550000000")
	if err != nil || n != 1 {
		t.Fatalf("ErasePhone = %d, %v; want 1", n, err)
	}
	var left []int64
	rows, err := pool.Query(ctx, `SELECT delivery_id FROM webhook_attempts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if len(left) != 1 || left[0] != other.ID {
		t.Fatalf("attempts left of deliveries %v, want only %d's", left, other.ID)
	}
	if ds, err := s.Deliveries(ctx, company, ep.ID, "", 10); err != nil || len(ds) != 1 || ds[0].ID != other.ID {
		t.Fatalf("deliveries left: %+v (%v), want only %d", ds, err, other.ID)
	}
}
