// Package segments keeps a company's segments: named sets of its contacts
// that a campaign can be sent to. Creating a segment, or adding contacts to
// one, creates the contacts the company does not have and merges names and
// variables into the ones it has, exactly as an automation trigger does
// (pkg/contacts), in the same transaction as the membership.
package segments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
)

// ErrNotFound is a segment the company does not have.
var ErrNotFound = catalog.ErrNotFound

// LimitError is a segment that would exceed the company's allowance
// (companies.max_segments).
type LimitError struct{ Max int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("Maximum number of segments reached: this workspace may have %d", e.Max)
}

// NameTakenError is a segment name the company already uses.
type NameTakenError struct {
	Name string
	ID   int64
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("A segment named %q already exists: segment %d", e.Name, e.ID)
}

// Segment is a company's segment and its current size.
type Segment struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Contacts  int       `json:"contacts"`
	CreatedAt time.Time `json:"created_at"`
}

// Added is what adding contacts to a segment did.
type Added struct {
	SegmentID int64 `json:"segment_id"`
	// Added is how many contacts became members (those already members
	// are not counted).
	Added int `json:"added"`
	// Contacts is the segment's size afterwards.
	Contacts int `json:"contacts"`
}

// Store reads and writes segments.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore returns a store with the clock now (time.Now when nil).
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Create makes a segment named name (already trimmed and checked by the
// schema) with the given contacts as its first members. It fails with a
// *NameTakenError when the company has a segment of that name, or a
// *LimitError when it has max_segments already; then nothing changes.
//
// The company's row is locked (FOR NO KEY UPDATE, which leaves foreign-key
// checks of other writers alone) for the count and the insert, so two
// concurrent creates cannot both take the last place.
func (s *Store) Create(ctx context.Context, companyID int64, name string, members []contacts.Upsert) (Segment, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	var seg Segment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var max, count int
		if err := tx.QueryRow(ctx, `SELECT max_segments FROM companies WHERE id = $1 FOR NO KEY UPDATE`, companyID).Scan(&max); err != nil {
			return fmt.Errorf("lock company %d: %w", companyID, err)
		}
		var existing int64
		err := tx.QueryRow(ctx, `SELECT id FROM segments WHERE company_id = $1 AND name = $2`, companyID, name).Scan(&existing)
		switch {
		case err == nil:
			return &NameTakenError{Name: name, ID: existing}
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("find segment by name: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM segments WHERE company_id = $1`, companyID).Scan(&count); err != nil {
			return fmt.Errorf("count segments: %w", err)
		}
		if count >= max {
			return &LimitError{Max: max}
		}
		seg = Segment{Name: name, CreatedAt: now}
		if err := tx.QueryRow(ctx, `INSERT INTO segments (company_id, name, created_at) VALUES ($1, $2, $3) RETURNING id`,
			companyID, name, now).Scan(&seg.ID); err != nil {
			return fmt.Errorf("insert segment: %w", err)
		}
		added, err := addMembers(ctx, tx, companyID, seg.ID, members, now)
		seg.Contacts = added
		return err
	})
	if err != nil {
		return Segment{}, err
	}
	return seg, nil
}

// AddContacts makes the given contacts members of the company's segment
// (ErrNotFound for an unknown or another company's segment). Contacts that
// are members already are updated but not counted again.
func (s *Store) AddContacts(ctx context.Context, companyID, segmentID int64, members []contacts.Upsert) (Added, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	out := Added{SegmentID: segmentID}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The share lock keeps the segment while its members are added.
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM segments WHERE id = $1 AND company_id = $2 FOR KEY SHARE`, segmentID, companyID).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("segment %d: %w", segmentID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("find segment %d: %w", segmentID, err)
		}
		if out.Added, err = addMembers(ctx, tx, companyID, segmentID, members, now); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM segment_members WHERE segment_id = $1`, segmentID).Scan(&out.Contacts)
	})
	if err != nil {
		return Added{}, err
	}
	return out, nil
}

// addMembers upserts the contacts and adds the ones not yet members; it
// returns how many it added.
func addMembers(ctx context.Context, tx pgx.Tx, companyID, segmentID int64, members []contacts.Upsert, now time.Time) (int, error) {
	if len(members) == 0 {
		return 0, nil
	}
	saved, err := contacts.NewStore(tx, func() time.Time { return now }).Upsert(ctx, companyID, members)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, 0, len(saved))
	for _, c := range saved {
		ids = append(ids, c.ID)
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO segment_members (segment_id, contact_id, added_at)
		SELECT $1, id, $3 FROM unnest($2::bigint[]) AS id ORDER BY id
		ON CONFLICT (segment_id, contact_id) DO NOTHING`, segmentID, ids, now)
	if err != nil {
		return 0, fmt.Errorf("add members to segment %d: %w", segmentID, err)
	}
	return int(tag.RowsAffected()), nil
}

// Size is how many members the company's segment has (ErrNotFound for an
// unknown or another company's segment).
func (s *Store) Size(ctx context.Context, companyID, segmentID int64) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM segment_members m WHERE m.segment_id = s.id)
		FROM segments s WHERE s.id = $1 AND s.company_id = $2`, segmentID, companyID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("segment %d: %w", segmentID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("size segment %d: %w", segmentID, err)
	}
	return n, nil
}
