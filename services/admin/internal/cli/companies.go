package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
)

var (
	slugRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	digitsRe = regexp.MustCompile(`^[0-9]{1,32}$`)
)

// resolveCompany finds a company by id or slug. A reference of digits is
// tried as an id first, then as a slug (slugs may be all digits).
func resolveCompany(ctx context.Context, cat *catalog.Store, ref string) (catalog.Company, error) {
	if ref == "" {
		return catalog.Company{}, usagef("--company is required (an id or a slug)")
	}
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		c, err := cat.Company(ctx, id)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, catalog.ErrNotFound) {
			return catalog.Company{}, err
		}
	}
	c, err := cat.CompanyBySlug(ctx, ref)
	if errors.Is(err, catalog.ErrNotFound) {
		return catalog.Company{}, fmt.Errorf("company %q not found", ref)
	}
	return c, err
}

// withCompany opens the catalog and resolves --company.
func (e *env) withCompany(ctx context.Context, ref string) (*catalog.Store, catalog.Company, error) {
	if ref == "" {
		return nil, catalog.Company{}, usagef("--company is required (an id or a slug)")
	}
	cat, err := e.catalog(ctx)
	if err != nil {
		return nil, catalog.Company{}, err
	}
	c, err := resolveCompany(ctx, cat, ref)
	return cat, c, err
}

func companyFlag(c *cobra.Command, ref *string) {
	c.Flags().StringVar(ref, "company", "", "the company, by id or slug (required)")
	_ = c.MarkFlagRequired("company")
}

func companyRows(cs ...catalog.Company) [][]string {
	rows := make([][]string, len(cs))
	for i, c := range cs {
		rows[i] = []string{fmtID(c.ID), c.Slug, c.Name, yesNo(c.SubscriptionActive), yesNo(c.Provisioned), strconv.Itoa(c.MaxSegments), fmtTime(c.CreatedAt)}
	}
	return rows
}

var companyHeader = []string{"ID", "SLUG", "NAME", "SUBSCRIPTION", "PROVISIONED", "MAX SEGMENTS", "CREATED"}

func (e *env) showCompany(c catalog.Company) error {
	return e.emit(c, func(w io.Writer) {
		fields(w, "id", fmtID(c.ID), "slug", c.Slug, "name", c.Name,
			"subscription active", yesNo(c.SubscriptionActive), "provisioned", yesNo(c.Provisioned),
			"max segments", strconv.Itoa(c.MaxSegments), "created", fmtTime(c.CreatedAt))
	})
}

func companiesCmd(e *env) *cobra.Command {
	return group("companies", "Create, list and update companies",
		companiesCreateCmd(e), companiesListCmd(e), companiesGetCmd(e), companiesUpdateCmd(e))
}

func companiesCreateCmd(e *env) *cobra.Command {
	var n catalog.NewCompany
	c := &cobra.Command{
		Use:     "create",
		Short:   "Create a company",
		Example: `  parleyctl companies create --slug acme --name "Acme Inc." --subscription-active --provisioned --max-segments 50`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			if !slugRe.MatchString(n.Slug) {
				return usagef("--slug %q: lower-case letters, digits and '-', starting with a letter or digit, at most 63", n.Slug)
			}
			if n.Name == "" {
				n.Name = n.Slug
			}
			if n.MaxSegments < 0 {
				return usagef("--max-segments must not be negative")
			}
			cat, err := e.catalog(ctx)
			if err != nil {
				return err
			}
			created, err := cat.CreateCompany(ctx, n)
			if errors.Is(err, catalog.ErrConflict) {
				return fmt.Errorf("company %q already exists", n.Slug)
			}
			if err != nil {
				return err
			}
			return e.showCompany(created)
		}),
	}
	c.Flags().StringVar(&n.Slug, "slug", "", "the operator's handle: a-z, 0-9 and '-' (required)")
	c.Flags().StringVar(&n.Name, "name", "", "display name (default: the slug)")
	c.Flags().BoolVar(&n.SubscriptionActive, "subscription-active", false, "the company holds an active subscription")
	c.Flags().BoolVar(&n.Provisioned, "provisioned", false, "the workspace is provisioned")
	c.Flags().IntVar(&n.MaxSegments, "max-segments", 100, "how many segments the company may create")
	_ = c.MarkFlagRequired("slug")
	return c
}

func companiesListCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List every company",
		Example: `  parleyctl companies list`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			cat, err := e.catalog(ctx)
			if err != nil {
				return err
			}
			cs, err := cat.Companies(ctx)
			if err != nil {
				return err
			}
			return e.emit(cs, func(w io.Writer) { table(w, "no companies", companyHeader, companyRows(cs...)) })
		}),
	}
}

func companiesGetCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "get <company>",
		Short:   "Show one company, by id or slug",
		Example: `  parleyctl companies get acme`,
		Args:    exactArgs(1, "one company id or slug"),
		RunE: run(func(ctx context.Context, args []string) error {
			_, co, err := e.withCompany(ctx, args[0])
			if err != nil {
				return err
			}
			return e.showCompany(co)
		}),
	}
}

func companiesUpdateCmd(e *env) *cobra.Command {
	var name string
	var sub, prov bool
	var maxSeg int
	c := &cobra.Command{
		Use:   "update <company>",
		Short: "Change a company's subscription, provisioning, segment allowance or name",
		Example: `  parleyctl companies update acme --subscription-active=false
  parleyctl companies update 3 --provisioned --max-segments 200`,
		Args: exactArgs(1, "one company id or slug"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		var u catalog.CompanyUpdate
		f := c.Flags()
		if f.Changed("name") {
			if name == "" {
				return usagef("--name must not be empty")
			}
			u.Name = &name
		}
		if f.Changed("subscription-active") {
			u.SubscriptionActive = &sub
		}
		if f.Changed("provisioned") {
			u.Provisioned = &prov
		}
		if f.Changed("max-segments") {
			if maxSeg < 0 {
				return usagef("--max-segments must not be negative")
			}
			u.MaxSegments = &maxSeg
		}
		if u == (catalog.CompanyUpdate{}) {
			return usagef("nothing to update: give --subscription-active, --provisioned, --max-segments or --name")
		}
		cat, co, err := e.withCompany(ctx, args[0])
		if err != nil {
			return err
		}
		updated, err := cat.UpdateCompany(ctx, co.ID, u)
		if err != nil {
			return err
		}
		e.invalidate(ctx, bus.Invalidation{Kind: bus.KindCompany, ID: fmtID(co.ID)})
		return e.showCompany(updated)
	})
	c.Flags().StringVar(&name, "name", "", "display name")
	c.Flags().BoolVar(&sub, "subscription-active", false, "the company holds an active subscription (--subscription-active=false to end it)")
	c.Flags().BoolVar(&prov, "provisioned", false, "the workspace is provisioned (--provisioned=false to withdraw it)")
	c.Flags().IntVar(&maxSeg, "max-segments", 0, "how many segments the company may create")
	return c
}
