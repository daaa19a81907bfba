package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/record"
)

func batchesCmd(e *env) *cobra.Command {
	return group("batches", "List a company's sends (batches), show one with its counts, list its messages, cancel it",
		batchesListCmd(e), batchesShowCmd(e), batchesMessagesCmd(e), batchesCancelCmd(e))
}

// named is a campaign, automation or segment as a person reads it: its
// name, or its id while only the id is known (a batch still in the stream).
func named(what, name string, id *int64) string {
	switch {
	case name != "":
		return fmt.Sprintf("%s %q", what, name)
	case id != nil:
		return what + " " + fmtID(*id)
	}
	return ""
}

// sends says what a batch sends, by name: `campaign "Spring sale" to
// segment "VIP"`, `automation "Order shipped"`, or "-" for a batch of
// messages given one by one.
func sends(b record.Batch) string {
	var parts []string
	if s := named("campaign", b.CampaignName, b.CampaignID); s != "" {
		parts = append(parts, s)
	}
	if s := named("automation", b.AutomationName, b.AutomationID); s != "" {
		parts = append(parts, s)
	}
	if s := named("segment", b.SegmentName, b.SegmentID); s != "" {
		if len(parts) > 0 {
			s = "to " + s
		}
		parts = append(parts, s)
	}
	return orDash(strings.Join(parts, " "))
}

// invalidFilter makes a filter record refused a usage mistake, named by
// its flag.
func invalidFilter(err error) error {
	var inv *record.InvalidError
	if errors.As(err, &inv) {
		return usagef("--%s: %s", inv.Field, inv.Msg)
	}
	return err
}

// optionalTime is an optional time flag: an RFC 3339 time or a duration
// ago (parseTimeFlag); nil when not given.
func optionalTime(flag, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := parseTimeFlag(flag, v, time.Now())
	return &t, err
}

// batchListView is a page of batches as --json prints it.
type batchListView struct {
	Batches    []record.Batch `json:"batches"`
	NextCursor *string        `json:"next_cursor"`
}

func batchesListCmd(e *env) *cobra.Command {
	var company, kind, status, source, since, until, cursor string
	var campaignID, automationID int64
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "List a company's batches, newest first, with what each sends by name",
		Long: strings.TrimSpace(`
Lists the company's recorded batches newest first, with the filters of
GET /api/batches. A batch still waiting in the stream is listed once a
dispatcher has recorded it (batches show finds it before). When more batches
remain, the next page's --cursor is printed last.`),
		Example: `  parleyctl batches list --company acme
  parleyctl batches list --company acme --kind campaign --status processing --since 24h
  parleyctl batches list --company acme --campaign 3 --limit 20 --cursor djE6YmF0Y2hlczo...`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		f := record.BatchFilter{Kind: bus.BatchKind(kind), Status: record.BatchState(status), Source: bus.Source(source),
			CampaignID: campaignID, AutomationID: automationID, Limit: limit, Cursor: cursor}
		var err error
		if f.Since, err = optionalTime("since", since); err != nil {
			return err
		}
		if f.Until, err = optionalTime("until", until); err != nil {
			return err
		}
		if limit < 1 {
			return usagef("--limit: limit must be between 1 and %d", record.MaxBatchLimit)
		}
		if campaignID < 0 || automationID < 0 {
			return usagef("--campaign and --automation are ids (positive)")
		}
		pool, co, err := e.companyDB(ctx, company)
		if err != nil {
			return err
		}
		page, err := record.ListBatches(ctx, pool, co.ID, f)
		if err != nil {
			return invalidFilter(err)
		}
		v := batchListView{Batches: page.Batches, NextCursor: page.NextCursor}
		rows := make([][]string, len(page.Batches))
		for i, b := range page.Batches {
			v.Batches[i] = b
			rows[i] = []string{b.ID, string(b.Kind), string(b.Status), sends(b), strconv.Itoa(b.ContactCount),
				fmtTime(b.AcceptedAt), fmtTimePtr(b.CompletedAt)}
		}
		return e.emit(v, func(w io.Writer) {
			table(w, "no batches", []string{"BATCH", "KIND", "STATUS", "SENDS", "CONTACTS", "ACCEPTED", "COMPLETED"}, rows)
			if page.NextCursor != nil {
				fmt.Fprintf(w, "\nmore: --cursor %s\n", *page.NextCursor)
			}
		})
	})
	companyFlag(c, &company)
	fl := c.Flags()
	fl.StringVar(&kind, "kind", "", "only this kind: "+names(bus.BatchKinds))
	fl.StringVar(&status, "status", "", "only this status: "+names(record.BatchStates))
	fl.StringVar(&source, "source", "", "only this source (api:campaigns_send, connector:shopify, ...)")
	fl.Int64Var(&campaignID, "campaign", 0, "only this campaign's batches (id)")
	fl.Int64Var(&automationID, "automation", 0, "only this automation's batches (id)")
	fl.StringVar(&since, "since", "", "only batches accepted at or after this time (RFC 3339, or a duration ago: 24h)")
	fl.StringVar(&until, "until", "", "only batches accepted before this time (RFC 3339, or a duration ago)")
	fl.IntVar(&limit, "limit", record.DefaultBatchLimit, fmt.Sprintf("page size, 1 to %d", record.MaxBatchLimit))
	fl.StringVar(&cursor, "cursor", "", "the cursor a previous page printed")
	return c
}

func names[T ~string](xs []T) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return strings.Join(out, ", ")
}

// companyDB resolves --company and opens the database.
func (e *env) companyDB(ctx context.Context, ref string) (*pgxpool.Pool, catalog.Company, error) {
	_, co, err := e.withCompany(ctx, ref)
	if err != nil {
		return nil, co, err
	}
	pool, err := e.db(ctx)
	if err != nil {
		return nil, co, err
	}
	return pool, co, nil
}

// sendsStream connects to NATS, on first use, to find batches waiting in
// the SENDS stream until a dispatcher records them.
func (e *env) sendsStream() (*record.Stream, error) {
	if e.stream != nil {
		return e.stream, nil
	}
	js, err := e.jetStream()
	if err != nil {
		return nil, err
	}
	e.stream = record.NewStream(js, e.cfg.NATS)
	return e.stream, nil
}

// jetStream connects to NATS on first use: the SENDS stream, where
// batches wait for a dispatcher and replies are published.
func (e *env) jetStream() (jetstream.JetStream, error) {
	if e.js != nil {
		return e.js, nil
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	nc, err := bus.Connect(cfg.NATS, "parleyctl")
	if err != nil {
		return nil, err
	}
	e.closers.Add(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	e.js = js
	return js, nil
}

// inStream finds batches waiting in the SENDS stream (record.InStream),
// saying why when the stream cannot be read.
type inStream struct{ e *env }

// Batch is the company's batch while it waits in the stream (what the
// gateway's GET /api/batches/{id} finds there); record.ErrNotFound when it
// is not there.
func (s inStream) Batch(ctx context.Context, companyID int64, batchID string) (record.Batch, error) {
	st, err := s.e.sendsStream()
	if err == nil {
		var b record.Batch
		if b, err = st.Batch(ctx, companyID, batchID); !errors.Is(err, record.ErrStreamUnreadable) {
			return b, err
		}
	}
	return record.Batch{}, fmt.Errorf("batch %s is not recorded, and the stream it may wait in cannot be read: %w", batchID, err)
}

// batchRef is a batch id as typed, and the company it is looked up in.
type batchRef struct {
	co catalog.Company
	id string
}

func (r batchRef) notFound() error {
	return fmt.Errorf("batch %s not found in company %q", r.id, r.co.Slug)
}

// findBatch reads a batch as GET /api/batches/{id} does (record.FindBatch:
// the record, then the stream, then the record again). pending says it was
// found in the stream; it then gets the names a recorded batch has.
func (e *env) findBatch(ctx context.Context, pool *pgxpool.Pool, ref batchRef) (b record.Batch, pending bool, err error) {
	b, pending, err = record.FindBatch(ctx, pool, inStream{e}, ref.co.ID, ref.id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return b, false, ref.notFound()
	case err == nil && pending:
		err = e.namePending(ctx, pool, &b)
	}
	return b, pending, err
}

// namePending gives a batch still in the stream, which has only ids, the
// names of its campaign, automation and segment, as a recorded one has.
func (e *env) namePending(ctx context.Context, pool *pgxpool.Pool, b *record.Batch) error {
	cat, err := e.catalog(ctx)
	if err != nil {
		return err
	}
	if b.CampaignID != nil {
		c, err := cat.Campaign(ctx, b.CompanyID, *b.CampaignID)
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return err
		}
		b.CampaignName = c.Name
	}
	if b.AutomationID != nil {
		a, err := cat.Automation(ctx, b.CompanyID, *b.AutomationID)
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return err
		}
		b.AutomationName = a.Name
	}
	if b.SegmentID != nil {
		err := pool.QueryRow(ctx, `SELECT name FROM segments WHERE id = $1 AND company_id = $2`, *b.SegmentID, b.CompanyID).Scan(&b.SegmentName)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("name segment %d: %w", *b.SegmentID, err)
		}
	}
	return nil
}

// batchArgCmd is a command on one batch: `<use> <batch_id> --company ...`.
func batchArgCmd(e *env, use, short, example string, body func(ctx context.Context, pool *pgxpool.Pool, ref batchRef) error) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     use + " <batch_id>",
		Short:   short,
		Example: example,
		Args:    exactArgs(1, "one batch id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		pool, co, err := e.companyDB(ctx, company)
		if err != nil {
			return err
		}
		return body(ctx, pool, batchRef{co: co, id: strings.TrimSpace(args[0])})
	})
	companyFlag(c, &company)
	return c
}

// batchFields are a batch's "label: value" lines.
func batchFields(co catalog.Company, b record.Batch) []string {
	f := []string{"batch", b.ID, "company", co.Slug, "kind", string(b.Kind), "source", string(b.Source), "status", string(b.Status)}
	if b.Error != "" {
		f = append(f, "error", b.Error)
	}
	f = append(f, "sends", sends(b), "contacts", strconv.Itoa(b.ContactCount), "forced", yesNo(b.IsForced))
	if b.ScheduledAt != nil {
		f = append(f, "scheduled", fmtTime(*b.ScheduledAt))
	}
	f = append(f, "accepted", fmtTime(b.AcceptedAt), "completed", fmtTimePtr(b.CompletedAt))
	if b.CancelledAt != nil {
		f = append(f, "cancelled", fmtTime(*b.CancelledAt))
	}
	return f
}

func batchesShowCmd(e *env) *cobra.Command {
	c := batchArgCmd(e, "show", "Show a batch with its messages counted by state (also while it waits in the stream)",
		"  parleyctl batches show 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme",
		func(ctx context.Context, pool *pgxpool.Pool, ref batchRef) error {
			b, pending, err := e.findBatch(ctx, pool, ref)
			if err != nil {
				return err
			}
			return e.emit(b, func(w io.Writer) {
				fields(w, batchFields(ref.co, b)...)
				if pending {
					fmt.Fprintln(w, "\nwaiting in the stream: no dispatcher has taken it yet, so it has no messages yet")
				}
				fmt.Fprintln(w)
				rows := make([][]string, 0, len(record.States))
				for _, s := range record.States {
					rows = append(rows, []string{string(s), strconv.Itoa(b.Counts[s])})
				}
				table(w, "", []string{"STATE", "MESSAGES"}, rows)
				if len(b.Held) > 0 {
					fmt.Fprintln(w)
					held := make([][]string, 0, len(b.Held))
					for _, h := range b.Held {
						until := ""
						if h.Until != nil {
							until = fmtTime(*h.Until)
						}
						held = append(held, []string{string(h.Reason), strconv.Itoa(h.Messages), h.TemplateName, until})
					}
					table(w, "", []string{"HELD FOR", "MESSAGES", "TEMPLATE", "FIRST MAY GO"}, held)
				}
			})
		})
	return c
}

func batchesMessagesCmd(e *env) *cobra.Command {
	var states []string
	var limit int
	var cursor string
	c := batchArgCmd(e, "messages", "List a batch's messages in batch order: phone, state, error, attempts, wamid",
		`  parleyctl batches messages 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme
  parleyctl batches messages 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme --state failed,skipped_opt_out`,
		func(ctx context.Context, pool *pgxpool.Pool, ref batchRef) error {
			if limit < 1 {
				return usagef("--limit: limit must be between 1 and %d", record.MaxLimit)
			}
			f := record.Filter{States: states, Limit: limit, Cursor: cursor}
			// A batch still in the stream has no messages yet: an empty page.
			page, err := record.BatchMessages(ctx, pool, inStream{e}, ref.co.ID, ref.id, f)
			if errors.Is(err, record.ErrNotFound) {
				return ref.notFound()
			}
			if err != nil {
				return invalidFilter(err)
			}
			rows := make([][]string, len(page.Messages))
			for i, m := range page.Messages {
				errText := "-"
				if m.ErrorCode != nil || m.ErrorTitle != nil {
					var parts []string
					if m.ErrorCode != nil {
						parts = append(parts, strconv.Itoa(*m.ErrorCode))
					}
					if m.ErrorTitle != nil {
						parts = append(parts, *m.ErrorTitle)
					}
					errText = strings.Join(parts, " ")
				}
				wamid := "-"
				if m.ProviderMessageID != nil {
					wamid = *m.ProviderMessageID
				}
				rows[i] = []string{fmtID(m.ID), m.Phone, string(m.State), errText, strconv.Itoa(m.Attempts), wamid}
			}
			return e.emit(page, func(w io.Writer) {
				table(w, "no messages", []string{"MESSAGE", "PHONE", "STATE", "ERROR", "ATTEMPTS", "WAMID"}, rows)
				if page.NextCursor != nil {
					fmt.Fprintf(w, "\nmore: --cursor %s\n", *page.NextCursor)
				}
			})
		})
	fl := c.Flags()
	fl.StringSliceVar(&states, "state", nil, "only messages in these states, comma separated: "+names(record.States))
	fl.IntVar(&limit, "limit", record.DefaultLimit, fmt.Sprintf("page size, 1 to %d", record.MaxLimit))
	fl.StringVar(&cursor, "cursor", "", "the cursor a previous page printed")
	return c
}

// cancelView is a cancel's result as --json prints it: the keys of POST
// /api/batches/{batch_id}/cancel's answer.
type cancelView struct {
	Cancelled int          `json:"cancelled"`
	Batch     record.Batch `json:"batch"`
}

func batchesCancelCmd(e *env) *cobra.Command {
	c := batchArgCmd(e, "cancel", "Cancel every message of a batch not yet handed to WhatsApp (also while it waits in the stream)",
		"  parleyctl batches cancel 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme",
		func(ctx context.Context, pool *pgxpool.Pool, ref batchRef) error {
			res, err := e.cancelBatch(ctx, pool, ref)
			if err != nil {
				return err
			}
			return e.emit(cancelView{Cancelled: res.Cancelled, Batch: res.Batch}, func(w io.Writer) {
				what := sends(res.Batch)
				if what == "-" {
					what = string(res.Batch.Kind) + " batch"
				}
				switch res.Cancelled {
				case 0:
					fmt.Fprintf(w, "nothing left to cancel in batch %s (%s): every message was already handed to WhatsApp or cancelled\n", res.ID, what)
				case 1:
					fmt.Fprintf(w, "cancelled 1 message of batch %s (%s)\n", res.ID, what)
				default:
					fmt.Fprintf(w, "cancelled %d messages of batch %s (%s)\n", res.Cancelled, res.ID, what)
				}
				fmt.Fprintln(w)
				fields(w, batchFields(ref.co, res.Batch)...)
			})
		})
	return c
}

// cancelBatch cancels as POST /api/batches/{id}/cancel does
// (record.CancelBatch: a recorded batch, else one waiting in the stream).
func (e *env) cancelBatch(ctx context.Context, pool *pgxpool.Pool, ref batchRef) (record.CancelResult, error) {
	res, err := record.CancelBatch(ctx, pool, inStream{e}, ref.co.ID, ref.id, time.Now())
	if errors.Is(err, record.ErrNotFound) {
		return res, ref.notFound()
	}
	return res, err
}
