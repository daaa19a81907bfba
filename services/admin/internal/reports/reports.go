// Package reports reads the reports of a company's campaigns and
// automations for the console: the list of each with its all-time counts,
// one's report over a range (record.ReadSubjectReport, what GET
// /api/campaigns/{id}/report answers), and its recent batches. Every read
// is scoped by company.
package reports

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/record"
)

// ErrNotFound is a campaign or automation the company does not have.
var ErrNotFound = record.ErrNotFound

// ErrBadRange is a range a report cannot be read over (record.ReportBuckets).
var ErrBadRange = record.ErrBadRange

// Store reads reports.
type Store struct{ db *pgxpool.Pool }

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{db: pool} }

// List returns the company's campaigns or automations (kind, a
// record.Subject*) by name, each with its counts over all time.
func (s *Store) List(ctx context.Context, companyID int64, kind string) ([]record.SubjectTotals, error) {
	return record.ListSubjects(ctx, s.db, companyID, kind)
}

// Subject returns one of the company's campaigns or automations.
func (s *Store) Subject(ctx context.Context, companyID int64, kind string, id int64) (record.ReportSubject, error) {
	return record.ReadSubject(ctx, s.db, companyID, kind, id)
}

// Report reads a subject's report as the API does.
func (s *Store) Report(ctx context.Context, q record.ReportQuery) (record.SubjectReport, error) {
	return record.ReadSubjectReport(ctx, s.db, q)
}

// RecentBatches returns up to limit of the subject's latest batches,
// newest first, without their counts.
func (s *Store) RecentBatches(ctx context.Context, companyID int64, kind string, id int64, limit int) ([]record.Batch, error) {
	f := record.BatchFilter{Limit: limit}
	if kind == record.SubjectCampaign {
		f.CampaignID = id
	} else {
		f.AutomationID = id
	}
	page, err := record.ListBatches(ctx, s.db, companyID, f)
	return page.Batches, err
}
