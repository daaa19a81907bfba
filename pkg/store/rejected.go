package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement (*pgxpool.Pool, pgx.Tx).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// RejectedMessage is a bus message that can never be processed, kept in
// rejected_bus_messages for an operator.
type RejectedMessage struct {
	Subject string
	// MsgID is its Nats-Msg-Id, "" when it had none.
	MsgID      string
	Reason     string
	Payload    []byte
	RejectedAt time.Time
}

// KeepRejected records m in rejected_bus_messages, once: a message kept
// before (the same subject, Nats-Msg-Id and payload) is not kept again. A
// batch rejected inside a group is kept again when the group is redelivered
// (another of its batches failed transiently), and so is a message whose
// Term was lost.
func KeepRejected(ctx context.Context, db Execer, m RejectedMessage) error {
	var msgID *string
	if m.MsgID != "" {
		msgID = &m.MsgID
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO rejected_bus_messages (subject, msg_id, reason, payload, rejected_at)
		SELECT $1, $2, $3, $4, $5
		WHERE NOT EXISTS (SELECT 1 FROM rejected_bus_messages
			WHERE subject = $1 AND msg_id IS NOT DISTINCT FROM $2 AND payload = $4)`,
		m.Subject, msgID, m.Reason, m.Payload, m.RejectedAt); err != nil {
		return fmt.Errorf("keep rejected message: %w", err)
	}
	return nil
}
