package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/record"
)

func exportCmd(e *env) *cobra.Command {
	return group("export", "Write a company's messages with their outcomes as CSV: a batch's, a campaign's, an automation's, or all over a time range",
		exportBatchCmd(e), exportSubjectCmd(e, record.ExportCampaign), exportSubjectCmd(e, record.ExportAutomation), exportMessagesCmd(e))
}

// exportLong is what every export command says about its file.
const exportLong = `
The CSV is the API's (GET /api/exports/messages): RFC 4180 with CRLF line
ends, UTF-8, a header row, one row per message, batch by batch in the order
they were accepted and each batch's messages in its order. A cell that
starts with = + - @, a tab or a carriage return has a ' before it, so that a
spreadsheet shows it as text (every phone: '+393331234567). --bom begins the
file with a byte order mark, which Excel needs to read UTF-8.

The rows stream as they are read: a million messages take little memory.
With --output the file is written beside its name and renamed only once it
is whole (mode 0600: it holds phone numbers); on stdout, a failure after the
first rows exits 1 with the file cut short.`

// exportFlags are the flags every export command takes.
type exportFlags struct {
	company, output, from, to string
	bom                       bool
}

func (f *exportFlags) add(c *cobra.Command, ranged bool) {
	companyFlag(c, &f.company)
	fl := c.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "write the CSV to this file instead of stdout")
	fl.BoolVar(&f.bom, "bom", false, "begin the file with a UTF-8 byte order mark, for Excel")
	if ranged {
		fl.StringVar(&f.from, "from", "", "batches accepted at or after this time (RFC 3339, or a duration ago: 720h); default 30 days before --to")
		fl.StringVar(&f.to, "to", "", "batches accepted before this time (RFC 3339, or a duration ago); default now")
	}
}

// exportView is what an export to a file prints.
type exportView struct {
	File string `json:"file"`
	Rows int64  `json:"rows"`
}

func exportBatchCmd(e *env) *cobra.Command {
	var f exportFlags
	c := &cobra.Command{
		Use:   "batch <batch_id>",
		Short: "Write every message of a batch as CSV (a batch still in the stream has none yet)",
		Long:  strings.TrimSpace("Writes every message of one of the company's batches.\n" + exportLong),
		Example: `  parleyctl export batch 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme > batch.csv
  parleyctl export batch 0197c2d4-8f7a-7b3e-9c1d-2a4b6c8d0e1f --company acme --bom -o batch.csv`,
		Args: exactArgs(1, "one batch id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		return e.export(ctx, &f, record.ExportQuery{Scope: record.ExportBatch, BatchID: strings.TrimSpace(args[0])})
	})
	f.add(c, false)
	return c
}

func exportSubjectCmd(e *env, scope record.ExportScope) *cobra.Command {
	var f exportFlags
	c := &cobra.Command{
		Use:   string(scope) + " <" + string(scope) + "_id>",
		Short: fmt.Sprintf("Write the messages of the %s's batches accepted in a time range as CSV", scope),
		Long: strings.TrimSpace(fmt.Sprintf("Writes the messages of the %s's batches accepted in [--from, --to)\n"+
			"(at most 366 days), each batch whole whenever its messages were sent.\n", scope) + exportLong),
		Example: fmt.Sprintf(`  parleyctl export %[1]s 7 --company acme > %[1]s.csv
  parleyctl export %[1]s 7 --company acme --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z -o november.csv`, scope),
		Args: exactArgs(1, "one "+string(scope)+" id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := strconv.ParseInt(strings.TrimSpace(args[0]), 10, 64)
		if err != nil || id < 1 {
			return usagef("%s id %q: want a positive integer", scope, args[0])
		}
		return e.export(ctx, &f, record.ExportQuery{Scope: scope, SubjectID: id})
	})
	f.add(c, true)
	return c
}

func exportMessagesCmd(e *env) *cobra.Command {
	var f exportFlags
	c := &cobra.Command{
		Use:   "messages",
		Short: "Write the messages of every batch accepted in a time range as CSV",
		Long: strings.TrimSpace("Writes the messages of every batch of the company (campaigns, automations, batch and\n" +
			"connector sends, replies) accepted in [--from, --to), at most 366 days.\n" + exportLong),
		Example: `  parleyctl export messages --company acme --from 720h -o last-30-days.csv`,
		Args:    noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		return e.export(ctx, &f, record.ExportQuery{Scope: record.ExportAll})
	})
	f.add(c, true)
	return c
}

// export writes the export q of --company to stdout or --output.
func (e *env) export(ctx context.Context, f *exportFlags, q record.ExportQuery) error {
	if e.json && f.output == "" {
		return usagef("--json prints what was written, which needs --output: without it the CSV goes to stdout")
	}
	if q.Scope != record.ExportBatch {
		now := time.Now()
		from, err := optionalTime("from", f.from)
		if err != nil {
			return err
		}
		to, err := optionalTime("to", f.to)
		if err != nil {
			return err
		}
		q.From, q.To = record.ExportRange(from, to, now)
	}
	pool, co, err := e.companyDB(ctx, f.company)
	if err != nil {
		return err
	}
	q.CompanyID = co.ID
	x, err := record.OpenExport(ctx, pool, inStream{e}, q)
	if errors.Is(err, record.ErrNotFound) {
		what := string(q.Scope) + " " + strconv.FormatInt(q.SubjectID, 10)
		if q.Scope == record.ExportBatch {
			what = "batch " + q.BatchID
		}
		return fmt.Errorf("%s not found in company %q", what, co.Slug)
	}
	if err != nil {
		return invalidFilter(err)
	}
	if f.output == "" {
		_, err := writeExport(ctx, x, e.io.Out, f.bom)
		return err
	}
	n, err := exportFile(ctx, x, f.output, f.bom)
	if err != nil {
		return err
	}
	return e.emit(exportView{File: f.output, Rows: n}, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %d messages to %s\n", n, f.output)
	})
}

// exportFile writes the export beside path and renames it to path once it
// is whole, so that a failed export never leaves a short file under the
// name asked for.
func exportFile(ctx context.Context, x *record.Export, path string, bom bool) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	n, err := writeExport(ctx, x, tmp, bom)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, err
	}
	return n, nil
}

// writeExport writes the header and every row of the export to w.
func writeExport(ctx context.Context, x *record.Export, w io.Writer, bom bool) (int64, error) {
	cw := csvexport.NewWriter(w, csvexport.Options{BOM: bom})
	if err := cw.Write(record.ExportColumns); err != nil {
		return 0, fmt.Errorf("write the export: %w", err)
	}
	var cells []string
	n, err := x.Each(ctx, func(r *record.ExportRow) error {
		cells = r.Cells(cells)
		return cw.Write(cells)
	})
	if err == nil {
		err = cw.Flush()
	}
	if err != nil {
		return n, fmt.Errorf("export after %d messages: %w", n, err)
	}
	return n, nil
}
