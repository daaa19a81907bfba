package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/segments"
)

// The segments commands use pkg/segments, as the gateway's public API does:
// the same names rules, the same refusal of a delete under waiting sends.

func segmentsCmd(e *env) *cobra.Command {
	return group("segments", "List, show, rename and delete a company's segments",
		segmentsListCmd(e), segmentsShowCmd(e), segmentsRenameCmd(e), segmentsDeleteCmd(e))
}

// companySegments resolves --company and opens the segment store.
func (e *env) companySegments(ctx context.Context, ref string) (catalog.Company, *segments.Store, error) {
	_, co, err := e.withCompany(ctx, ref)
	if err != nil {
		return co, nil, err
	}
	pool, err := e.db(ctx)
	if err != nil {
		return co, nil, err
	}
	return co, segments.NewStore(pool, nil), nil
}

// segmentErr says what went wrong with a segment in the operator's words.
func segmentErr(co catalog.Company, id int64, err error) error {
	var inUse *segments.InUseError
	switch {
	case errors.Is(err, segments.ErrNotFound):
		return fmt.Errorf("segment %d not found in company %q", id, co.Slug)
	case errors.As(err, &inUse):
		return fmt.Errorf("%s (parleyctl batches cancel <batch_id> --company %s): %s", inUse.Error(), co.Slug, strings.Join(inUse.BatchIDs, ", "))
	}
	return err
}

func (e *env) showSegment(co catalog.Company, s segments.Segment) error {
	return e.emit(s, func(w io.Writer) {
		fields(w, "id", fmtID(s.ID), "company", co.Slug, "name", s.Name, "contacts", strconv.Itoa(s.Contacts), "created", fmtTime(s.CreatedAt))
	})
}

func segmentsListCmd(e *env) *cobra.Command {
	var company, cursor string
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "List a company's segments with their sizes, by name, a page at a time",
		Example: `  parleyctl segments list --company acme
  parleyctl segments list --company acme --limit 100 --cursor djE6c2VnbWVudHM6...`,
		Args: noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			if limit < 1 || limit > segments.MaxLimit {
				return usagef("--limit must be 1 to %d", segments.MaxLimit)
			}
			co, s, err := e.companySegments(ctx, company)
			if err != nil {
				return err
			}
			page, err := s.List(ctx, co.ID, limit, cursor)
			if errors.Is(err, segments.ErrInvalidCursor) {
				return usagef("--cursor %q is not the next cursor of a segments list", cursor)
			}
			if err != nil {
				return err
			}
			return e.emit(page, func(w io.Writer) {
				rows := make([][]string, len(page.Segments))
				for i, seg := range page.Segments {
					rows[i] = []string{fmtID(seg.ID), seg.Name, strconv.Itoa(seg.Contacts), fmtTime(seg.CreatedAt)}
				}
				table(w, "no segments", []string{"ID", "NAME", "CONTACTS", "CREATED"}, rows)
				if page.NextCursor != nil {
					fmt.Fprintf(w, "\nmore: parleyctl segments list --company %s --limit %d --cursor %s\n", co.Slug, limit, *page.NextCursor)
				}
			})
		}),
	}
	companyFlag(c, &company)
	c.Flags().IntVar(&limit, "limit", segments.DefaultLimit, fmt.Sprintf("page size, 1 to %d", segments.MaxLimit))
	c.Flags().StringVar(&cursor, "cursor", "", "the next cursor a list printed")
	return c
}

// segmentCmd is a command on one segment of a company: <segment_id>
// --company; body's errors are told in the operator's words.
func segmentCmd(e *env, use, short, example string, body func(ctx context.Context, co catalog.Company, s *segments.Store, id int64) error) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     use + " <segment_id>",
		Short:   short,
		Example: example,
		Args:    exactArgs(1, "one segment id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id < 1 {
			return usagef("segment id %q is not a positive integer", args[0])
		}
		co, s, err := e.companySegments(ctx, company)
		if err != nil {
			return err
		}
		return segmentErr(co, id, body(ctx, co, s, id))
	})
	companyFlag(c, &company)
	return c
}

func segmentsShowCmd(e *env) *cobra.Command {
	return segmentCmd(e, "show", "Show a segment and its size", "  parleyctl segments show 12 --company acme",
		func(ctx context.Context, co catalog.Company, s *segments.Store, id int64) error {
			seg, err := s.Get(ctx, co.ID, id)
			if err != nil {
				return err
			}
			return e.showSegment(co, seg)
		})
}

func segmentsRenameCmd(e *env) *cobra.Command {
	var name string
	c := segmentCmd(e, "rename", "Rename a segment (the name is trimmed, 1 to 255 characters, unique in the company)",
		`  parleyctl segments rename 12 --company acme --name "Gold customers"`,
		func(ctx context.Context, co catalog.Company, s *segments.Store, id int64) error {
			seg, err := s.Rename(ctx, co.ID, id, strings.TrimSpace(name))
			if err != nil {
				return err
			}
			return e.showSegment(co, seg)
		})
	inner := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		// The API's rule (validation: trimmed, then 1 to 255 characters).
		if n := strings.TrimSpace(name); n == "" || len([]rune(n)) > 255 {
			return usagef("--name must be 1 to 255 characters after trimming")
		}
		return inner(cmd, args)
	}
	c.Flags().StringVar(&name, "name", "", "the new name (required)")
	_ = c.MarkFlagRequired("name")
	return c
}

func segmentsDeleteCmd(e *env) *cobra.Command {
	return segmentCmd(e, "delete",
		"Delete a segment: its memberships go (its contacts stay), its name is free; refused while scheduled sends wait for it",
		"  parleyctl segments delete 12 --company acme",
		func(ctx context.Context, co catalog.Company, s *segments.Store, id int64) error {
			seg, err := s.Get(ctx, co.ID, id)
			if err != nil {
				return err
			}
			if err := s.Delete(ctx, co.ID, id); err != nil {
				return err
			}
			out := struct {
				Deleted int64  `json:"deleted"`
				Name    string `json:"name"`
			}{seg.ID, seg.Name}
			return e.emit(out, func(w io.Writer) { fmt.Fprintf(w, "deleted segment %d %q of company %q\n", seg.ID, seg.Name, co.Slug) })
		})
}
