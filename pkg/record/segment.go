package record

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WaitingOnSegment is the ids of the company's recorded batches that still
// wait to expand or send to the segment (status accepted or scheduled),
// oldest first: a segment cannot be deleted under them (pkg/segments).
// A batch still in the stream is not recorded yet; its expansion fails
// when it finds the segment deleted (pkg/delivery).
func WaitingOnSegment(ctx context.Context, db DB, companyID, segmentID int64) ([]string, error) {
	rows, err := db.Query(ctx, `
		SELECT id::text FROM batches
		WHERE segment_id = $1 AND company_id = $2 AND status IN ('accepted', 'scheduled')
		ORDER BY id`, segmentID, companyID)
	if err != nil {
		return nil, fmt.Errorf("batches waiting on segment %d: %w", segmentID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("batches waiting on segment %d: %w", segmentID, err)
	}
	return ids, nil
}
