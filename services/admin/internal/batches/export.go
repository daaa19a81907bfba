package batches

import (
	"context"

	"github.com/parleyhq/parley/pkg/record"
)

// OpenExport checks an export of the company's messages (record.OpenExport):
// the console's downloads. A batch still waiting in the stream is not
// found, as the Sends pages do not list it either.
func (s *Store) OpenExport(ctx context.Context, q record.ExportQuery) (*record.Export, error) {
	return record.OpenExport(ctx, s.db, nil, q)
}
