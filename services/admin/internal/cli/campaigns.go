package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
)

func checkName(flag, name string) error {
	if strings.TrimSpace(name) == "" || len(name) > 255 {
		return usagef("%s must be 1 to 255 characters", flag)
	}
	return nil
}

func campaignsCmd(e *env) *cobra.Command {
	return group("campaigns", "Create and list campaigns", campaignsCreateCmd(e), campaignsListCmd(e))
}

func (e *env) showCampaign(co catalog.Company, c catalog.Campaign) error {
	return e.emit(c, func(w io.Writer) {
		fields(w, "id", fmtID(c.ID), "company", co.Slug, "name", c.Name, "template", fmtID(c.TemplateID),
			"messaging account", fmtID(c.MessagingAccountID), "created", fmtTime(c.CreatedAt))
	})
}

func campaignsCreateCmd(e *env) *cobra.Command {
	var company, name string
	var templateID, accountID int64
	c := &cobra.Command{
		Use:     "create",
		Short:   "Create a campaign: a template sent through a messaging account",
		Example: `  parleyctl campaigns create --company acme --name "Spring sale" --template 3 --account 2`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			if err := checkName("--name", name); err != nil {
				return err
			}
			cat, co, err := e.withCompany(ctx, company)
			if err != nil {
				return err
			}
			created, err := cat.CreateCampaign(ctx, co.ID, name, templateID, accountID)
			if errors.Is(err, catalog.ErrNotFound) {
				return fmt.Errorf("template %d or messaging account %d not found in company %q", templateID, accountID, co.Slug)
			}
			if err != nil {
				return err
			}
			return e.showCampaign(co, created)
		}),
	}
	companyFlag(c, &company)
	c.Flags().StringVar(&name, "name", "", "display name (required)")
	c.Flags().Int64Var(&templateID, "template", 0, "template id (required)")
	c.Flags().Int64Var(&accountID, "account", 0, "messaging account id (required)")
	for _, f := range []string{"name", "template", "account"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func campaignsListCmd(e *env) *cobra.Command {
	return companyList[catalog.Campaign, catalog.Campaign]{
		noun: "campaigns", short: "List a company's campaigns", empty: "no campaigns",
		header: []string{"ID", "NAME", "TEMPLATE", "ACCOUNT", "CREATED"},
		load:   (*catalog.Store).Campaigns,
		each: func(c catalog.Campaign) (catalog.Campaign, []string) {
			return c, []string{fmtID(c.ID), c.Name, fmtID(c.TemplateID), fmtID(c.MessagingAccountID), fmtTime(c.CreatedAt)}
		},
	}.cmd(e)
}
