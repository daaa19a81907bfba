package record

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExportScope is what an export of messages covers.
type ExportScope string

// The scopes: one batch, or the batches a campaign, an automation or
// anything of the company's sent that were accepted in a time range.
const (
	ExportBatch      ExportScope = "batch"
	ExportCampaign   ExportScope = "campaign"
	ExportAutomation ExportScope = "automation"
	ExportAll        ExportScope = "messages"
)

// Export ranges: at most MaxExportRange long; DefaultExportRange before
// its end when no start is given.
const (
	MaxExportRange     = 366 * 24 * time.Hour
	DefaultExportRange = 30 * 24 * time.Hour
)

// ExportQuery asks for a company's messages. A range [From, To) selects
// batches by when the gateway accepted them: the time a batch's UUIDv7 id
// carries, to the millisecond (the id is made at acceptance; accepted_at
// agrees with it, but for a batch retried with the same Idempotency-Key
// after a publish in doubt, which keeps its first id). A batch's messages
// are all in or all out, whenever each was sent.
type ExportQuery struct {
	CompanyID int64
	Scope     ExportScope
	// BatchID is the batch of ExportBatch.
	BatchID string
	// SubjectID is the campaign of ExportCampaign, the automation of
	// ExportAutomation.
	SubjectID int64
	// From and To bound every scope but ExportBatch.
	From, To time.Time
}

// ExportRange is the range of an export from what was asked: to defaults
// to now, from to DefaultExportRange before to.
func ExportRange(from, to *time.Time, now time.Time) (time.Time, time.Time) {
	end := now
	if to != nil {
		end = *to
	}
	start := end.Add(-DefaultExportRange)
	if from != nil {
		start = *from
	}
	return start, end
}

// check returns an *InvalidError (field from) for a range that cannot be
// exported: empty, backwards or longer than MaxExportRange.
func (q ExportQuery) check() error {
	if q.Scope == ExportBatch {
		return nil
	}
	if !q.From.Before(q.To) {
		return &InvalidError{Field: "from", Input: q.From.Format(time.RFC3339Nano), Msg: "from must be before to"}
	}
	if q.To.Sub(q.From) > MaxExportRange {
		return &InvalidError{Field: "from", Input: q.From.Format(time.RFC3339Nano),
			Msg: "the range is longer than 366 days: narrow it"}
	}
	return nil
}

// ExportColumns are the export's columns, in order: its header row.
var ExportColumns = []string{"message_id", "batch_id", "kind", "campaign", "automation", "template",
	"messaging_account", "phone", "state", "error_code", "error_title", "created_at", "sent_at",
	"delivered_at", "read_at", "failed_at", "cancelled_at", "billable", "pricing_category",
	"pricing_model", "replied", "replied_at"}

// ExportRow is one message as an export has it. Names are those of now
// ("" for none: a message batch has no campaign, a reply no template).
type ExportRow struct {
	MessageID        int64
	BatchID          string
	Seq              int
	Kind             string
	Campaign         string
	Automation       string
	Template         string
	MessagingAccount string
	// Phone is "" for a contact that was erased.
	Phone           string
	State           State
	ErrorCode       *int
	ErrorTitle      *string
	CreatedAt       time.Time
	SentAt          *time.Time
	DeliveredAt     *time.Time
	ReadAt          *time.Time
	FailedAt        *time.Time
	CancelledAt     *time.Time
	Billable        *bool
	PricingCategory *string
	PricingModel    *string
	RepliedAt       *time.Time
}

// Cells appends the row's cells, in ExportColumns' order, to dst[:0]:
// times in RFC 3339, UTC, to the second; "" for what is unknown (NULL);
// booleans true or false.
func (r *ExportRow) Cells(dst []string) []string {
	return append(dst[:0], strconv.FormatInt(r.MessageID, 10), r.BatchID, r.Kind, r.Campaign, r.Automation,
		r.Template, r.MessagingAccount, r.Phone, string(r.State), optionalInt(r.ErrorCode), deref(r.ErrorTitle),
		exportTime(&r.CreatedAt), exportTime(r.SentAt), exportTime(r.DeliveredAt), exportTime(r.ReadAt),
		exportTime(r.FailedAt), exportTime(r.CancelledAt), optionalBool(r.Billable), deref(r.PricingCategory),
		deref(r.PricingModel), strconv.FormatBool(r.RepliedAt != nil), exportTime(r.RepliedAt))
}

func optionalInt(v *int) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}

func optionalBool(v *bool) string {
	if v == nil {
		return ""
	}
	return strconv.FormatBool(*v)
}

func deref(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

// exportTime is t in UTC to the second, as 2026-11-28T09:15:30Z: fixed
// width, so that a spreadsheet sorts it as text.
func exportTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

// Export is an export that OpenExport checked: its rows are read by Each.
type Export struct {
	Query ExportQuery
	// Name is the campaign's or automation's name; "" for the other scopes.
	Name string
	db   TxDB
	// pending is a batch that waits in the stream: no messages yet.
	pending bool
}

// OpenExport checks an export: an *InvalidError for a range that cannot
// be exported, ErrNotFound when the company has no such batch (recorded,
// or waiting in the stream w, which may be nil), campaign or automation.
// Nothing is read from the messages yet.
func OpenExport(ctx context.Context, db TxDB, w InStream, q ExportQuery) (*Export, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	e := &Export{Query: q, db: db}
	var err error
	switch q.Scope {
	case ExportBatch:
		e.Query.BatchID, e.pending, err = findExportBatch(ctx, db, w, q.CompanyID, q.BatchID)
	case ExportCampaign, ExportAutomation:
		table := map[ExportScope]string{ExportCampaign: "campaigns", ExportAutomation: "automations"}[q.Scope]
		err = db.QueryRow(ctx, `SELECT name FROM `+table+` WHERE company_id = $1 AND id = $2`, q.CompanyID, q.SubjectID).Scan(&e.Name)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("%s %d: %w", q.Scope, q.SubjectID, ErrNotFound)
		}
	case ExportAll:
	default:
		err = fmt.Errorf("export of %q: %w", q.Scope, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// findExportBatch finds the company's batch in the record, then in the
// stream, then in the record again (as FindBatch does), and returns its id
// as the record writes it; pending is true when only the stream has it.
func findExportBatch(ctx context.Context, db DB, w InStream, companyID int64, batchID string) (string, bool, error) {
	u, err := uuid.Parse(batchID)
	if err != nil {
		return "", false, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	id := u.String()
	recorded := func() (bool, error) {
		var ok bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM batches WHERE id = $1 AND company_id = $2)`, id, companyID).Scan(&ok)
		if err != nil {
			return false, fmt.Errorf("find batch %s: %w", id, err)
		}
		return ok, nil
	}
	if ok, err := recorded(); err != nil || ok {
		return id, false, err
	}
	if w != nil {
		if _, err := w.Batch(ctx, companyID, id); !errors.Is(err, ErrNotFound) {
			return id, err == nil, err
		}
	}
	if ok, err := recorded(); err != nil || ok {
		return id, false, err
	}
	return "", false, fmt.Errorf("batch %s: %w", id, ErrNotFound)
}

// Filename names the export's file: its scope, what it is of (a
// campaign's or automation's id and name made a slug) and its dates
// (the last day the range covers, in UTC), as
// campaign-7-black-friday_2026-10-29_2026-11-28.csv or
// batch-0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de.csv. Only a-z, 0-9, - and _.
func (e *Export) Filename() string {
	q := e.Query
	if q.Scope == ExportBatch {
		return "batch-" + q.BatchID + ".csv"
	}
	name := string(q.Scope)
	if q.Scope != ExportAll {
		name += "-" + strconv.FormatInt(q.SubjectID, 10)
		if s := slug(e.Name); s != "" {
			name += "-" + s
		}
	}
	last := q.To.Add(-time.Nanosecond)
	return name + "_" + q.From.UTC().Format(time.DateOnly) + "_" + last.UTC().Format(time.DateOnly) + ".csv"
}

// slug is s in lower-case ASCII letters and digits, every other run of
// characters a hyphen, at most 40 characters.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

// idAt is the smallest UUIDv7 whose time is at or after t: its first 48
// bits are t's Unix milliseconds, rounded up, and the rest zero. A batch
// accepted in [from, to) has from's idAt <= id < to's idAt.
func idAt(t time.Time) uuid.UUID {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	ms = min(max(ms, 0), 1<<48-1)
	var id uuid.UUID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(id[:6], b[2:])
	return id
}

// nextID is the id right after id (id + 1 as a 128-bit number); the
// largest id has none and is returned as is.
func nextID(id uuid.UUID) uuid.UUID {
	for i := len(id) - 1; i >= 0; i-- {
		id[i]++
		if id[i] != 0 {
			return id
		}
	}
	return uuid.Max
}

// An export reads its batches exportPage at a time, and their messages in
// queries of at most exportWindow rows.
const (
	exportPage   = 1000
	exportWindow = 5000
)

// The export's queries, and why each is driven by an index on a table of
// any size (EXPLAIN ANALYZE on 1.5 million messages in 300,000 batches of
// three companies, PostgreSQL 15):
//
//   - exportBatchesSQL: a range of batch ids (UUIDv7: a range of
//     acceptance times) of one company, in id order, 1000 at a time: an
//     index scan of batches_company_idx (company_id, id DESC), read
//     backwards, or of batches_pkey when the company owns most of the
//     range. The campaign or automation is a filter on those rows (no
//     index has it: a campaign's export reads the index entries of the
//     company's other batches in the range, which are few beside their
//     messages). Each batch's largest seq is an index-only scan of one
//     entry of messages_batch_id_seq_key (batch_id, seq), backwards.
//   - exportMessagesSQL: the messages of a few batches, or of a window of
//     seqs of one large batch: an index scan of messages_batch_id_seq_key
//     (or a bitmap scan of messages_batch_state_idx, whose leading column
//     is the batch). No query sorts more than exportWindow rows. The
//     planner cannot know how many messages a batch has, and sometimes
//     sorts a batch's rows rather than read the (batch_id, seq) index in
//     order: one query over a 300,000-message batch sorted it on disk
//     (21 MB), and keyset pages with LIMIT re-read the rest of the batch
//     for each page. So batches are grouped up to exportWindow rows a
//     query (by their largest seq), and a larger batch is read window by
//     window of seqs, whatever the plan.
//
// All run in one REPEATABLE READ, READ ONLY transaction: the export is
// one snapshot of the record, however long it takes to read.
const (
	exportBatchesSQL = `
		SELECT b.id, b.kind::text, COALESCE(c.name, ''), COALESCE(a.name, ''),
			COALESCE((SELECT max(m.seq) FROM messages m WHERE m.batch_id = b.id), -1)
		FROM batches b
		LEFT JOIN campaigns c ON c.id = b.campaign_id
		LEFT JOIN automations a ON a.id = b.automation_id
		WHERE b.company_id = $1 AND b.id >= $2::uuid AND b.id < $3::uuid
			AND ($4::bigint = 0 OR b.campaign_id = $4) AND ($5::bigint = 0 OR b.automation_id = $5)
		ORDER BY b.id
		LIMIT $6`
	exportMessagesSQL = `
		SELECT m.id, m.batch_id, m.seq, m.template_id, m.messaging_account_id, m.phone, m.state::text,
			m.error_code, m.error_title, m.created_at, m.sent_at, m.delivered_at, m.read_at, m.failed_at,
			m.cancelled_at, m.billable, m.pricing_category, m.pricing_model, m.replied_at
		FROM messages m
		WHERE m.batch_id = ANY($1::uuid[]) AND m.seq >= $2 AND m.seq < $3 AND m.company_id = $4
		ORDER BY m.batch_id, m.seq`
)

// exportBatch is a batch of an export's page.
type exportBatch struct {
	id                         [16]byte
	text                       string
	kind, campaign, automation string
	// last is its largest seq, -1 when it has no message.
	last int
}

// exportReader is one run of Each.
type exportReader struct {
	tx        pgx.Tx
	q         ExportQuery
	fn        func(*ExportRow) error
	templates map[int64]string
	accounts  map[int64]string
	row       ExportRow
	n         int64
}

// Each reads the export's messages and calls fn with each, batch by batch
// in the order they were accepted (their ids) and each batch's messages in
// their order (seq); it returns how many it read. Memory does not grow with
// the export: fn's row is reused (it is valid until fn returns), and at
// most a page of batches and a query's rows are held. An error of fn stops
// the export and is returned as is. Every message is read in one snapshot
// (see exportBatchesSQL).
func (e *Export) Each(ctx context.Context, fn func(*ExportRow) error) (int64, error) {
	if e.pending {
		return 0, nil // in the stream: no message yet
	}
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("export: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only: nothing to undo
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return 0, fmt.Errorf("export: snapshot: %w", err)
	}
	r := &exportReader{tx: tx, q: e.Query, fn: fn}
	if err := r.names(ctx); err != nil {
		return 0, err
	}
	lo, hi := idAt(e.Query.From), idAt(e.Query.To)
	if e.Query.Scope == ExportBatch {
		id := uuid.MustParse(e.Query.BatchID) // OpenExport parsed it
		lo, hi = id, nextID(id)
	}
	for {
		page, err := r.batches(ctx, lo, hi)
		if err != nil {
			return r.n, err
		}
		if err := r.page(ctx, page); err != nil {
			return r.n, err
		}
		if len(page) < exportPage {
			return r.n, nil
		}
		lo = nextID(page[len(page)-1].id)
	}
}

// names reads the names of the company's templates and numbers, which
// messages name by id.
func (r *exportReader) names(ctx context.Context) error {
	r.templates, r.accounts = map[int64]string{}, map[int64]string{}
	rows, err := r.tx.Query(ctx, `
		SELECT true, id, name FROM templates WHERE company_id = $1
		UNION ALL
		SELECT false, id, name FROM messaging_accounts WHERE company_id = $1`, r.q.CompanyID)
	if err != nil {
		return fmt.Errorf("export: names: %w", err)
	}
	var isTemplate bool
	var id int64
	var name string
	_, err = pgx.ForEachRow(rows, []any{&isTemplate, &id, &name}, func() error {
		if isTemplate {
			r.templates[id] = name
		} else {
			r.accounts[id] = name
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export: names: %w", err)
	}
	return nil
}

// batches reads the next page of the export's batches, from lo (included)
// to hi (excluded).
func (r *exportReader) batches(ctx context.Context, lo, hi uuid.UUID) ([]exportBatch, error) {
	var campaign, automation int64
	switch r.q.Scope {
	case ExportCampaign:
		campaign = r.q.SubjectID
	case ExportAutomation:
		automation = r.q.SubjectID
	}
	rows, err := r.tx.Query(ctx, exportBatchesSQL, r.q.CompanyID, lo.String(), hi.String(), campaign, automation, exportPage)
	if err != nil {
		return nil, fmt.Errorf("export: batches: %w", err)
	}
	page := make([]exportBatch, 0, exportPage)
	var b exportBatch
	_, err = pgx.ForEachRow(rows, []any{&b.id, &b.kind, &b.campaign, &b.automation, &b.last}, func() error {
		b.text = uuid.UUID(b.id).String()
		page = append(page, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export: batches: %w", err)
	}
	return page, nil
}

// page reads the messages of a page of batches: small batches together,
// up to exportWindow messages a query, and a larger one window by window.
func (r *exportReader) page(ctx context.Context, page []exportBatch) error {
	var group []exportBatch
	size := 0
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		err := r.messages(ctx, group, 0, 1<<31-1)
		group, size = group[:0], 0
		return err
	}
	for _, b := range page {
		n := b.last + 1
		switch {
		case n == 0:
		case n > exportWindow:
			if err := flush(); err != nil {
				return err
			}
			for lo := 0; lo <= b.last; lo += exportWindow {
				if err := r.messages(ctx, []exportBatch{b}, lo, lo+exportWindow); err != nil {
					return err
				}
			}
		default:
			if size+n > exportWindow {
				if err := flush(); err != nil {
					return err
				}
			}
			group, size = append(group, b), size+n
		}
	}
	return flush()
}

// messages reads the messages of group (batches in id order) whose seq is
// in [lo, hi), in batch and seq order, and hands each to fn.
func (r *exportReader) messages(ctx context.Context, group []exportBatch, lo, hi int) error {
	ids := make([]string, len(group))
	for i, b := range group {
		ids[i] = b.text
	}
	rows, err := r.tx.Query(ctx, exportMessagesSQL, ids, lo, hi, r.q.CompanyID)
	if err != nil {
		return fmt.Errorf("export: messages: %w", err)
	}
	defer rows.Close()
	row := &r.row
	var batch [16]byte
	var template, account *int64
	var state string
	at := 0
	for rows.Next() {
		if err := rows.Scan(&row.MessageID, &batch, &row.Seq, &template, &account, &row.Phone, &state,
			&row.ErrorCode, &row.ErrorTitle, &row.CreatedAt, &row.SentAt, &row.DeliveredAt, &row.ReadAt,
			&row.FailedAt, &row.CancelledAt, &row.Billable, &row.PricingCategory, &row.PricingModel,
			&row.RepliedAt); err != nil {
			return fmt.Errorf("export: messages: %w", err)
		}
		for at < len(group)-1 && group[at].id != batch {
			at++ // rows come in the group's order
		}
		b := &group[at]
		row.BatchID, row.Kind, row.Campaign, row.Automation = b.text, b.kind, b.campaign, b.automation
		row.State, row.Template, row.MessagingAccount = State(state), "", ""
		if template != nil {
			row.Template = r.templates[*template]
		}
		if account != nil {
			row.MessagingAccount = r.accounts[*account]
		}
		r.n++
		if err := r.fn(row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export: messages: %w", err)
	}
	return nil
}
