package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// Batch is a send batch with its messages counted by state. Its JSON is
// the API's (GET /api/batches/{batch_id}, and GET /api/batches without
// counts) and parleyctl's --json.
type Batch struct {
	ID        string        `json:"batch_id"`
	CompanyID int64         `json:"company_id"`
	Kind      bus.BatchKind `json:"kind"`
	Source    bus.Source    `json:"source"`
	Status    BatchState    `json:"status"`
	Error     string        `json:"error,omitempty"`
	// What the batch sends, with the names a person reads (the names only
	// once a dispatcher recorded the batch; a batch still in the stream has
	// the ids).
	CampaignID     *int64     `json:"campaign_id,omitempty"`
	CampaignName   string     `json:"campaign_name,omitempty"`
	AutomationID   *int64     `json:"automation_id,omitempty"`
	AutomationName string     `json:"automation_name,omitempty"`
	SegmentID      *int64     `json:"segment_id,omitempty"`
	SegmentName    string     `json:"segment_name,omitempty"`
	ContactCount   int        `json:"contacts"`
	IsForced       bool       `json:"is_forced"`
	ScheduledAt    *time.Time `json:"scheduled_at,omitempty"`
	AcceptedAt     time.Time  `json:"accepted_at"`
	CompletedAt    *time.Time `json:"completed_at,omitempty"`
	// CancelledAt is when the batch was first cancelled.
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	// Counts has every message state, zero included; nil in a listing
	// (ListBatches), which does not count messages.
	Counts map[State]int `json:"counts,omitempty"`
	// Held says why the held messages wait, by reason (with the template's
	// name, or when the first may go for the messaging limit); absent when
	// none is held.
	Held []HeldCount `json:"held,omitempty"`
}

// batchSelect reads a recorded batch with the names of its campaign,
// automation and segment; scanBatch scans its row.
const batchSelect = `
	SELECT b.id::text, b.company_id, b.kind::text, b.source, b.status::text, COALESCE(b.error, ''), b.contact_count,
		b.is_forced, b.scheduled_at, b.accepted_at, b.completed_at, b.cancelled_at,
		b.campaign_id, COALESCE(c.name, ''), b.automation_id, COALESCE(a.name, ''), b.segment_id, COALESCE(s.name, '')
	FROM batches b
	LEFT JOIN campaigns c ON c.id = b.campaign_id
	LEFT JOIN automations a ON a.id = b.automation_id
	LEFT JOIN segments s ON s.id = b.segment_id`

func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	var status, source string
	err := row.Scan(&b.ID, &b.CompanyID, &b.Kind, &source, &status, &b.Error, &b.ContactCount,
		&b.IsForced, &b.ScheduledAt, &b.AcceptedAt, &b.CompletedAt, &b.CancelledAt,
		&b.CampaignID, &b.CampaignName, &b.AutomationID, &b.AutomationName, &b.SegmentID, &b.SegmentName)
	b.Status, b.Source = BatchState(status), bus.ParseSource(source) // recorded with a legacy spelling: canonical
	return b, err
}

// counted completes a batch with its messages' counts (by state; the states
// not given are zero). A batch with no messages yet that is cancelled
// (cancelled in the stream, not expanded yet) counts its contacts as
// cancelled: its messages will be created cancelled. Recorded and pending
// batches are both finished here.
func (b Batch) counted(counts map[State]int) Batch {
	b.Counts = make(map[State]int, len(States))
	total := 0
	for _, s := range States {
		b.Counts[s] = counts[s]
		total += counts[s]
	}
	if b.Status == BatchCancelled && total == 0 {
		b.Counts[StateCancelled] = b.ContactCount
	}
	return b
}

// BatchStatus returns a company's recorded batch with its messages counted
// by state; another company's batch (or an unknown or malformed id) is
// ErrNotFound. db may be a transaction.
func BatchStatus(ctx context.Context, db DB, companyID int64, batchID string) (Batch, error) {
	if _, err := uuid.Parse(batchID); err != nil {
		return Batch{}, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	b, err := scanBatch(db.QueryRow(ctx, batchSelect+` WHERE b.id = $1::uuid AND b.company_id = $2`, batchID, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Batch{}, fmt.Errorf("batch %s: %w", batchID, ErrNotFound)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("load batch %s: %w", batchID, err)
	}
	rows, err := db.Query(ctx, `SELECT state::text, count(*) FROM messages WHERE batch_id = $1::uuid GROUP BY state`, b.ID)
	if err != nil {
		return Batch{}, fmt.Errorf("count messages of batch %s: %w", batchID, err)
	}
	defer rows.Close()
	counts := map[State]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return Batch{}, fmt.Errorf("count messages of batch %s: %w", batchID, err)
		}
		counts[State(s)] = n
	}
	if err := rows.Err(); err != nil {
		return Batch{}, fmt.Errorf("count messages of batch %s: %w", batchID, err)
	}
	rows.Close()
	if counts[StateHeld] > 0 {
		if b.Held, err = BatchHeld(ctx, db, b.ID); err != nil {
			return Batch{}, err
		}
	}
	return b.counted(counts), nil
}

// Pending is a batch message waiting in the SENDS stream (no dispatcher has
// recorded it yet) as a batch of companyID with status accepted and no
// messages. Its kind and source are bus.DescribeBatch's, as the dispatcher
// that records it decides them; a campaign batch to a segment counts the
// segment's size as the gateway measured it.
func Pending(companyID int64, msg proto.Message) (Batch, error) {
	kind, source, err := bus.DescribeBatch(msg)
	if err != nil {
		return Batch{}, err
	}
	b := Batch{CompanyID: companyID, Kind: kind, Source: source, Status: BatchAccepted}
	var scheduled interface{ AsTime() time.Time }
	switch m := msg.(type) {
	case *sendsv1.CampaignBatch:
		b.ID, b.IsForced, b.ContactCount, b.AcceptedAt = m.BatchId, m.IsForced, len(m.Phones), m.AcceptedAt.AsTime()
		b.CampaignID = nonZero(m.CampaignId)
		if m.SegmentId != 0 {
			b.ContactCount = int(m.SegmentSize)
			b.SegmentID = nonZero(m.SegmentId)
		}
		if m.ScheduledAt != nil {
			scheduled = m.ScheduledAt
		}
	case *sendsv1.AutomationBatch:
		b.ID, b.IsForced, b.ContactCount, b.AcceptedAt = m.BatchId, true, len(m.Contacts), m.AcceptedAt.AsTime()
		b.AutomationID = nonZero(m.AutomationId)
	case *sendsv1.MessageBatch:
		b.ID, b.IsForced, b.ContactCount, b.AcceptedAt = m.BatchId, m.IsForced, len(m.Messages), m.AcceptedAt.AsTime()
		// The expansion records a campaign when every message names the
		// same one (a connector's target campaign).
		for i, e := range m.Messages {
			if e.CampaignId == 0 || e.CampaignId != m.Messages[0].CampaignId {
				break
			}
			if i == len(m.Messages)-1 {
				b.CampaignID = nonZero(e.CampaignId)
			}
		}
		if m.ScheduledAt != nil {
			scheduled = m.ScheduledAt
		}
	case *sendsv1.ReplyBatch:
		b.ID, b.IsForced, b.ContactCount, b.AcceptedAt = m.BatchId, true, 1, m.AcceptedAt.AsTime()
	}
	if scheduled != nil {
		t := scheduled.AsTime()
		b.ScheduledAt = &t
	}
	return b.counted(nil), nil
}

func nonZero(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
