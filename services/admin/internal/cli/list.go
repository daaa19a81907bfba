package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
)

// companyList is a `<noun> list --company <id or slug>` command: it loads
// the company's items and prints them as a table or, with --json, as a JSON
// array of their views.
type companyList[T, V any] struct {
	noun   string // the command group, as typed: "campaigns"
	short  string
	empty  string // what the table says when there is nothing
	header []string
	// load is a catalog.Store method such as (*catalog.Store).Campaigns, or
	// a function of the same form.
	load func(cat *catalog.Store, ctx context.Context, companyID int64) ([]T, error)
	// each is an item's JSON view and its table row.
	each func(T) (V, []string)
}

func (l companyList[T, V]) cmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "list",
		Short:   l.short,
		Example: "  parleyctl " + l.noun + " list --company acme",
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			cat, co, err := e.withCompany(ctx, company)
			if err != nil {
				return err
			}
			items, err := l.load(cat, ctx, co.ID)
			if err != nil {
				return err
			}
			views := make([]V, len(items))
			rows := make([][]string, len(items))
			for i, it := range items {
				views[i], rows[i] = l.each(it)
			}
			return e.emit(views, func(w io.Writer) { table(w, l.empty, l.header, rows) })
		}),
	}
	companyFlag(c, &company)
	return c
}
