package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
)

func connectorsCmd(e *env) *cobra.Command {
	return group("connectors", "Add, list and connect third-party connectors",
		connectorsCreateCmd(e), connectorsListCmd(e), connectorsUpdateCmd(e))
}

func (e *env) showConnector(co catalog.Company, c catalog.Connector) error {
	return e.emit(c, func(w io.Writer) {
		fields(w, "id", fmtID(c.ID), "company", co.Slug, "name", c.Name, "connected", yesNo(c.Connected),
			"target automation", fmtIDPtr(c.TargetAutomationID), "target campaign", fmtIDPtr(c.TargetCampaignID),
			"created", fmtTime(c.CreatedAt))
	})
}

var connectorNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func connectorsCreateCmd(e *env) *cobra.Command {
	var company, name string
	var connected bool
	var automationID, campaignID int64
	c := &cobra.Command{
		Use:   "create",
		Short: "Add a connector; a send through it triggers its target automation or sends its target campaign",
		Example: `  parleyctl connectors create --company acme --name shopify --connected --automation 5
  parleyctl connectors create --company acme --name klaviyo --campaign 7`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		if !connectorNameRe.MatchString(name) {
			return usagef("--name %q: the path segment of /api/<name>/send: a-z, 0-9, '-' and '_'", name)
		}
		if catalog.ReservedConnectorName(name) {
			return usagef("--name %q is reserved: /api/%s/... is one of the API's own routes (reserved: %s)",
				name, name, strings.Join(catalog.ReservedConnectorNames, ", "))
		}
		n := catalog.NewConnector{Name: name, Connected: connected}
		if c.Flags().Changed("automation") {
			n.TargetAutomationID = &automationID
		}
		if c.Flags().Changed("campaign") {
			n.TargetCampaignID = &campaignID
		}
		if n.TargetAutomationID != nil && n.TargetCampaignID != nil {
			return usagef("give --automation or --campaign, not both")
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		n.CompanyID = co.ID
		created, err := cat.CreateConnector(ctx, n)
		switch {
		case errors.Is(err, catalog.ErrConflict):
			return fmt.Errorf("connector %q already exists in company %q", name, co.Slug)
		case errors.Is(err, catalog.ErrNotFound) && n.TargetAutomationID != nil:
			return fmt.Errorf("automation %d not found in company %q", automationID, co.Slug)
		case errors.Is(err, catalog.ErrNotFound):
			return fmt.Errorf("campaign %d not found in company %q", campaignID, co.Slug)
		case err != nil:
			return err
		}
		return e.showConnector(co, created)
	})
	companyFlag(c, &company)
	f := c.Flags()
	f.StringVar(&name, "name", "", "the connector's name, as in POST /api/<name>/send (required)")
	f.BoolVar(&connected, "connected", false, "the connector is connected (a send through a disconnected one answers 404)")
	f.Int64Var(&automationID, "automation", 0, "target automation id")
	f.Int64Var(&campaignID, "campaign", 0, "target campaign id")
	_ = c.MarkFlagRequired("name")
	return c
}

func connectorsListCmd(e *env) *cobra.Command {
	return companyList[catalog.Connector, catalog.Connector]{
		noun: "connectors", short: "List a company's connectors", empty: "no connectors",
		header: []string{"ID", "NAME", "CONNECTED", "AUTOMATION", "CAMPAIGN", "CREATED"},
		load:   (*catalog.Store).Connectors,
		each: func(c catalog.Connector) (catalog.Connector, []string) {
			return c, []string{fmtID(c.ID), c.Name, yesNo(c.Connected), fmtIDPtr(c.TargetAutomationID), fmtIDPtr(c.TargetCampaignID), fmtTime(c.CreatedAt)}
		},
	}.cmd(e)
}

func connectorsUpdateCmd(e *env) *cobra.Command {
	var company string
	var connected bool
	c := &cobra.Command{
		Use:     "update <name>",
		Short:   "Connect or disconnect a connector",
		Example: `  parleyctl connectors update shopify --company acme --connected=false`,
		Args:    exactArgs(1, "one connector name"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		if !c.Flags().Changed("connected") {
			return usagef("nothing to update: give --connected or --connected=false")
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		if err := cat.SetConnectorConnected(ctx, co.ID, args[0], connected); errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("connector %q not found in company %q", args[0], co.Slug)
		} else if err != nil {
			return err
		}
		conn, err := cat.Connector(ctx, co.ID, args[0])
		if err != nil {
			return err
		}
		e.invalidate(ctx, bus.Invalidation{Kind: bus.KindConnector, ID: fmtID(conn.ID)})
		return e.showConnector(co, conn)
	})
	companyFlag(c, &company)
	c.Flags().BoolVar(&connected, "connected", true, "the connector is connected (--connected=false to disconnect it)")
	return c
}
