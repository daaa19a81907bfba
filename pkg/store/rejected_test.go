package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestKeepRejectedKeepsAMessageOnce: the same message kept again (a group
// redelivered, a lost Term) is one row; another message is another row.
func TestKeepRejectedKeepsAMessageOnce(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	at := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	msgs := []store.RejectedMessage{
		{Subject: "sends.campaign.g.01a2", MsgID: "01a2-0001", Reason: "bad batch", Payload: []byte{1, 2}, RejectedAt: at},
		{Subject: "sends.campaign.g.01a2", MsgID: "01a2-0001", Reason: "bad batch", Payload: []byte{1, 2}, RejectedAt: at.Add(time.Second)},
		{Subject: "sends.campaign.g.01a2", MsgID: "01a2-0002", Reason: "bad batch", Payload: []byte{1, 2}, RejectedAt: at},
		{Subject: "sends.campaign.g.01a2", MsgID: "01a2-0001", Reason: "bad batch", Payload: []byte{3}, RejectedAt: at},
		{Subject: "sends.automation.7.x", Reason: "no id", Payload: []byte{4}, RejectedAt: at},
		{Subject: "sends.automation.7.x", Reason: "no id", Payload: []byte{4}, RejectedAt: at},
	}
	for _, m := range msgs {
		if err := store.KeepRejected(ctx, pool, m); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var first time.Time
	if err := pool.QueryRow(ctx, `SELECT count(*), min(rejected_at) FROM rejected_bus_messages`).Scan(&n, &first); err != nil {
		t.Fatal(err)
	}
	if n != 4 || !first.Equal(at) {
		t.Fatalf("%d rows (first at %s), want 4 (first at %s)", n, first, at)
	}
}
