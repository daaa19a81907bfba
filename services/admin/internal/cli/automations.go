package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
)

func automationsCmd(e *env) *cobra.Command {
	return group("automations", "Create, list and switch automations",
		automationsCreateCmd(e), automationsListCmd(e), automationsUpdateCmd(e))
}

func (e *env) showAutomation(co catalog.Company, a catalog.Automation) error {
	return e.emit(a, func(w io.Writer) {
		fields(w, "id", fmtID(a.ID), "company", co.Slug, "name", a.Name, "type", string(a.Type), "active", yesNo(a.Active),
			"template", fmtIDPtr(a.TemplateID), "messaging account", fmtIDPtr(a.MessagingAccountID),
			"account connected", yesNo(a.AccountConnected), "trigger variables", orDash(strings.Join(a.TriggerVariables, ", ")),
			"created", fmtTime(a.CreatedAt))
	})
}

func automationsCreateCmd(e *env) *cobra.Command {
	var company, name, typ string
	var active bool
	var templateID, accountID int64
	var vars []string
	c := &cobra.Command{
		Use:   "create",
		Short: "Create an automation; template and account are optional (a trigger then answers 422)",
		Example: `  parleyctl automations create --company acme --name "Order update" --type api --active \
      --template 3 --account 2 --variables order_id,tracking_url`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		if err := checkName("--name", name); err != nil {
			return err
		}
		t := catalog.AutomationType(typ)
		if t != catalog.TypeAPI && t != catalog.TypeEvent && t != catalog.TypeScheduled {
			return usagef("--type %q: api, event or scheduled", typ)
		}
		n := catalog.NewAutomation{Name: name, Type: t, Active: active, TriggerVariables: []string{}}
		seen := map[string]bool{}
		for _, v := range vars {
			v = strings.TrimSpace(v)
			if v == "" || len(v) > 100 {
				return usagef("--variables: each name 1 to 100 characters")
			}
			if !seen[v] {
				seen[v] = true
				n.TriggerVariables = append(n.TriggerVariables, v)
			}
		}
		if c.Flags().Changed("template") {
			n.TemplateID = &templateID
		}
		if c.Flags().Changed("account") {
			n.MessagingAccountID = &accountID
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		n.CompanyID = co.ID
		created, err := cat.CreateAutomation(ctx, n)
		if errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("template %s or messaging account %s not found in company %q", fmtIDPtr(n.TemplateID), fmtIDPtr(n.MessagingAccountID), co.Slug)
		}
		if err != nil {
			return err
		}
		return e.showAutomation(co, created)
	})
	companyFlag(c, &company)
	f := c.Flags()
	f.StringVar(&name, "name", "", "display name (required)")
	f.StringVar(&typ, "type", "api", "how it is triggered: api, event or scheduled (the public API triggers only api)")
	f.BoolVar(&active, "active", false, "the automation can be triggered")
	f.Int64Var(&templateID, "template", 0, "template id")
	f.Int64Var(&accountID, "account", 0, "messaging account id")
	f.StringSliceVar(&vars, "variables", nil, "trigger variables every contact must supply, comma-separated")
	_ = c.MarkFlagRequired("name")
	return c
}

func automationsListCmd(e *env) *cobra.Command {
	return companyList[catalog.Automation, catalog.Automation]{
		noun: "automations", short: "List a company's automations", empty: "no automations",
		header: []string{"ID", "NAME", "TYPE", "ACTIVE", "TEMPLATE", "ACCOUNT", "VARIABLES", "CREATED"},
		load:   (*catalog.Store).Automations,
		each: func(a catalog.Automation) (catalog.Automation, []string) {
			return a, []string{fmtID(a.ID), a.Name, string(a.Type), yesNo(a.Active), fmtIDPtr(a.TemplateID), fmtIDPtr(a.MessagingAccountID),
				orDash(strings.Join(a.TriggerVariables, ",")), fmtTime(a.CreatedAt)}
		},
	}.cmd(e)
}

func parseID(what, s string) (int64, error) {
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil || id < 1 || fmtID(id) != s {
		return 0, usagef("%s %q is not an id", what, s)
	}
	return id, nil
}

func automationsUpdateCmd(e *env) *cobra.Command {
	var company string
	var active bool
	c := &cobra.Command{
		Use:   "update <automation_id>",
		Short: "Switch an automation on or off",
		Example: `  parleyctl automations update 5 --company acme --active=false
  parleyctl automations update 5 --company acme --active`,
		Args: exactArgs(1, "one automation id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := parseID("automation id", args[0])
		if err != nil {
			return err
		}
		if !c.Flags().Changed("active") {
			return usagef("nothing to update: give --active or --active=false")
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		if err := cat.SetAutomationActive(ctx, co.ID, id, active); errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("automation %d not found in company %q", id, co.Slug)
		} else if err != nil {
			return err
		}
		e.invalidate(ctx, bus.Invalidation{Kind: bus.KindAutomation, ID: fmtID(id)})
		a, err := cat.Automation(ctx, co.ID, id)
		if err != nil {
			return err
		}
		return e.showAutomation(co, a)
	})
	companyFlag(c, &company)
	c.Flags().BoolVar(&active, "active", true, "the automation can be triggered (--active=false to switch it off)")
	return c
}
