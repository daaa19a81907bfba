// Package segments keeps a company's segments: named sets of its contacts
// that a campaign can be sent to. Creating a segment, or adding contacts to
// one, creates the contacts the company does not have and merges names and
// variables into the ones it has, exactly as an automation trigger does
// (pkg/contacts), in the same transaction as the membership.
//
// A deleted segment is kept, marked deleted_at, so that past batches keep
// its id and name; it has no members, its name is free again, it does not
// count towards the company's allowance, and every method here answers
// ErrNotFound for it. The gateway's public API and parleyctl use this
// package.
package segments

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
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
		if err := nameFree(ctx, tx, companyID, 0, name); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM segments WHERE company_id = $1 AND deleted_at IS NULL`, companyID).Scan(&count); err != nil {
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
		// A delete (FOR UPDATE) waits for it, or it finds the segment deleted.
		if _, err := lockLive(ctx, tx, companyID, segmentID, "FOR KEY SHARE"); err != nil {
			return err
		}
		var err error
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
	seg, err := s.Get(ctx, companyID, segmentID)
	return seg.Contacts, err
}

// nameFree fails with a *NameTakenError when a live segment of the company
// other than self (0 for none) is named name.
func nameFree(ctx context.Context, tx pgx.Tx, companyID, self int64, name string) error {
	var other int64
	err := tx.QueryRow(ctx, `SELECT id FROM segments WHERE company_id = $1 AND name = $2 AND deleted_at IS NULL AND id <> $3`,
		companyID, name, self).Scan(&other)
	switch {
	case err == nil:
		return &NameTakenError{Name: name, ID: other}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("find segment by name: %w", err)
	}
	return nil
}

// lockLive locks the company's live segment with lock (a row-level lock
// clause) and returns its name; ErrNotFound when it has none such.
func lockLive(ctx context.Context, tx pgx.Tx, companyID, segmentID int64, lock string) (string, error) {
	var name string
	err := tx.QueryRow(ctx, `SELECT name FROM segments WHERE id = $1 AND company_id = $2 AND deleted_at IS NULL `+lock,
		segmentID, companyID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("segment %d: %w", segmentID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("find segment %d: %w", segmentID, err)
	}
	return name, nil
}

// segmentColumns are a Segment's, from segments s.
const segmentColumns = `s.id, s.name, (SELECT count(*) FROM segment_members m WHERE m.segment_id = s.id), s.created_at`

func scanSegment(row pgx.Row) (Segment, error) {
	var seg Segment
	err := row.Scan(&seg.ID, &seg.Name, &seg.Contacts, &seg.CreatedAt)
	return seg, err
}

// Get returns the company's segment with its size (ErrNotFound for an
// unknown, deleted or another company's segment).
func (s *Store) Get(ctx context.Context, companyID, segmentID int64) (Segment, error) {
	seg, err := scanSegment(s.pool.QueryRow(ctx, `SELECT `+segmentColumns+`
		FROM segments s WHERE s.id = $1 AND s.company_id = $2 AND s.deleted_at IS NULL`, segmentID, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Segment{}, fmt.Errorf("segment %d: %w", segmentID, ErrNotFound)
	}
	if err != nil {
		return Segment{}, fmt.Errorf("read segment %d: %w", segmentID, err)
	}
	return seg, nil
}

// Listing limits.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// ErrInvalidCursor is a cursor that no page of the listing gave.
var ErrInvalidCursor = errors.New("cursor is not one this listing gave")

// Page is one page of a company's segments, by name.
type Page struct {
	Segments []Segment `json:"segments"`
	// NextCursor continues after the last segment; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

const cursorPrefix = "v1:segments:"

func encodeCursor(seg Segment) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seg.ID, 10) + ":" + seg.Name))
}

// decodeCursor returns the name and id after which a page starts.
func decodeCursor(c string) (string, int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	rest, ok := strings.CutPrefix(string(raw), cursorPrefix)
	id, name, ok2 := strings.Cut(rest, ":")
	n, nerr := strconv.ParseInt(id, 10, 64)
	if err != nil || !ok || !ok2 || nerr != nil || n < 1 || name == "" || !utf8.ValidString(name) {
		return "", 0, ErrInvalidCursor
	}
	return name, n, nil
}

// List returns a page of the company's live segments with their sizes, by
// name (then id), limit of them (0 is DefaultLimit; at most MaxLimit),
// after cursor (a page's NextCursor, "" for the first page). A segment
// renamed between pages is listed where its new name falls.
func (s *Store) List(ctx context.Context, companyID int64, limit int, cursor string) (Page, error) {
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return Page{}, fmt.Errorf("list segments: limit %d is not between 1 and %d", limit, MaxLimit)
	}
	var afterName *string
	var afterID int64
	if cursor != "" {
		name, id, err := decodeCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		afterName, afterID = &name, id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+segmentColumns+`
		FROM segments s
		WHERE s.company_id = $1 AND s.deleted_at IS NULL AND ($2::text IS NULL OR (s.name, s.id) > ($2::text, $3::bigint))
		ORDER BY s.name, s.id
		LIMIT $4`, companyID, afterName, afterID, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("list segments of company %d: %w", companyID, err)
	}
	segs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Segment, error) { return scanSegment(r) })
	if err != nil {
		return Page{}, fmt.Errorf("list segments of company %d: %w", companyID, err)
	}
	p := Page{Segments: segs}
	if len(segs) > limit {
		p.Segments = segs[:limit]
		next := encodeCursor(p.Segments[limit-1])
		p.NextCursor = &next
	}
	if p.Segments == nil {
		p.Segments = []Segment{}
	}
	return p, nil
}

// Rename gives the company's segment the name (already trimmed and checked
// by the schema) and returns it. A *NameTakenError when another of its
// live segments has that name; its own name is no change. The company's
// row is locked as in Create, so that a create and a rename cannot both
// take one name.
func (s *Store) Rename(ctx context.Context, companyID, segmentID int64, name string) (Segment, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM companies WHERE id = $1 FOR NO KEY UPDATE`, companyID); err != nil {
			return fmt.Errorf("lock company %d: %w", companyID, err)
		}
		if _, err := lockLive(ctx, tx, companyID, segmentID, "FOR NO KEY UPDATE"); err != nil {
			return err
		}
		if err := nameFree(ctx, tx, companyID, segmentID, name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE segments SET name = $2 WHERE id = $1`, segmentID, name); err != nil {
			return fmt.Errorf("rename segment %d: %w", segmentID, err)
		}
		return nil
	})
	if err != nil {
		return Segment{}, err
	}
	return s.Get(ctx, companyID, segmentID)
}

// Removed is what removing contacts from a segment did.
type Removed struct {
	SegmentID int64 `json:"segment_id"`
	// Removed is how many members left the segment (phones that were not
	// members, or are no contact of the company, are not counted).
	Removed int `json:"removed"`
	// Contacts is the segment's size afterwards.
	Contacts int `json:"contacts"`
}

// RemoveContacts takes the contacts with the given phones (E.164, with or
// without '+'; a phone given twice counts once) out of the company's
// segment; the contacts themselves stay. A phone that is not a member, or
// not a valid number, is no error: it is not counted.
func (s *Store) RemoveContacts(ctx context.Context, companyID, segmentID int64, phones []string) (Removed, error) {
	numbers := make([]string, 0, len(phones))
	for _, p := range phones {
		if n, ok := phone.Normalize(p); ok {
			numbers = append(numbers, n)
		}
	}
	out := Removed{SegmentID: segmentID}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := lockLive(ctx, tx, companyID, segmentID, "FOR KEY SHARE"); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			DELETE FROM segment_members m USING contacts c
			WHERE m.segment_id = $1 AND m.contact_id = c.id AND c.company_id = $2 AND c.phone = ANY($3::text[])`,
			segmentID, companyID, numbers)
		if err != nil {
			return fmt.Errorf("remove members of segment %d: %w", segmentID, err)
		}
		out.Removed = int(tag.RowsAffected())
		return tx.QueryRow(ctx, `SELECT count(*) FROM segment_members WHERE segment_id = $1`, segmentID).Scan(&out.Contacts)
	})
	if err != nil {
		return Removed{}, err
	}
	return out, nil
}

// InUseError is a segment that recorded batches still wait to expand or
// send to (status accepted or scheduled): it cannot be deleted until they
// are cancelled.
type InUseError struct {
	Name     string
	BatchIDs []string
}

func (e *InUseError) Error() string {
	if len(e.BatchIDs) == 1 {
		return fmt.Sprintf("Segment %q is used by 1 scheduled send: cancel it first", e.Name)
	}
	return fmt.Sprintf("Segment %q is used by %d scheduled sends: cancel them first", e.Name, len(e.BatchIDs))
}

// Delete deletes the company's segment: it is marked deleted and its
// memberships are removed (its contacts stay). ErrNotFound for an unknown,
// deleted or another company's segment; an *InUseError, changing nothing,
// while a recorded batch waits to expand or send to it. A campaign batch
// to it still in the stream fails when it is expanded (pkg/delivery).
//
// The segment's row is locked FOR UPDATE first: a concurrent AddContacts,
// RemoveContacts or expansion (FOR KEY SHARE) finishes before the check of
// the batches, or finds the segment deleted.
func (s *Store) Delete(ctx context.Context, companyID, segmentID int64) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		name, err := lockLive(ctx, tx, companyID, segmentID, "FOR UPDATE")
		if err != nil {
			return err
		}
		waiting, err := record.WaitingOnSegment(ctx, tx, companyID, segmentID)
		if err != nil {
			return err
		}
		if len(waiting) > 0 {
			return &InUseError{Name: name, BatchIDs: waiting}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM segment_members WHERE segment_id = $1`, segmentID); err != nil {
			return fmt.Errorf("remove members of segment %d: %w", segmentID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE segments SET deleted_at = $2 WHERE id = $1`, segmentID, now); err != nil {
			return fmt.Errorf("delete segment %d: %w", segmentID, err)
		}
		return nil
	})
}
