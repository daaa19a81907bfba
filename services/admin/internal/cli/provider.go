package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/waba"
)

// waba is what submits templates: the catalog with the token box and the
// provider's client (PARLEY_WHATSAPP_*).
func (e *env) waba(ctx context.Context) (waba.Deps, error) {
	cat, err := e.catalog(ctx)
	if err != nil {
		return waba.Deps{}, err
	}
	client, err := e.cfg.Provider.NewClient()
	if err != nil {
		return waba.Deps{}, fmt.Errorf("PARLEY_WHATSAPP_BASE_URL: %w", err)
	}
	e.closers.Add(client.Close)
	return waba.Deps{Pool: e.pool, Catalog: cat, Provider: client, Log: zap.NewNop()}, nil
}

// flagOf is the flag that sets a template field waba names.
var flagOf = map[string]string{
	"name": "--name", "language": "--language", "category": "--category", "parameter_format": "--components",
	"components": "--components", "header_text": "--header-text", "header_media_url": "--header-media-url",
	"body_parameters": "--body", "url_buttons": "--url-button-N-suffix",
}

// submitTemplate creates a template through the provider (waba.Submit).
func (e *env) submitTemplate(ctx context.Context, c *cobra.Command, tf templateFlags, bindings []whatsapp.Binding) error {
	for _, f := range []string{"header", "url-button-1", "url-button-2"} {
		if c.Flags().Changed(f) {
			return usagef("--%s goes without --account: with it, the components say the header and the buttons", f)
		}
	}
	acctID, err := parseID("--account", tf.account)
	if err != nil {
		return err
	}
	comps, err := e.readComponents(tf.components)
	if err != nil {
		return err
	}
	n := waba.NewTemplate{MessagingAccountID: acctID, BodyParameters: bindings, HeaderText: tf.headerText, HeaderMediaURL: tf.mediaURL,
		Definition: whatsapp.TemplateDefinition{Name: tf.name, Language: tf.language, Category: tf.category, Components: comps}}
	for _, s := range []string{tf.s1, tf.s2} {
		if s != "" {
			n.URLSuffixes = append(n.URLSuffixes, s)
		}
	}
	cat, co, err := e.withCompany(ctx, tf.company)
	if err != nil {
		return err
	}
	n.CompanyID = co.ID
	deps, err := e.waba(ctx)
	if err != nil {
		return err
	}
	t, err := waba.Submit(ctx, deps, n)
	if err != nil {
		return submitError(err, co, tf)
	}
	hist, err := cat.TemplateHistory(ctx, co.ID, t.ID)
	if err != nil {
		return err
	}
	return e.showTemplate(co, t, hist)
}

func submitError(err error, co catalog.Company, tf templateFlags) error {
	var inv *waba.InvalidError
	switch {
	case errors.As(err, &inv):
		return usagef("%s: %s", flagOf[inv.Field], inv.Msg)
	case errors.Is(err, catalog.ErrInvalid):
		return usageError{err}
	case errors.Is(err, waba.ErrAccountNotFound):
		return usagef("--account %s: no messaging account of company %q", tf.account, co.Slug)
	case errors.Is(err, catalog.ErrConflict):
		return fmt.Errorf("template %q (%s) already exists in company %q", tf.name, tf.language, co.Slug)
	}
	return err
}

// readComponents reads the JSON array of components from a file or stdin.
func (e *env) readComponents(src string) ([]whatsapp.TemplateComponent, error) {
	if src == "" {
		return nil, usagef("--components is required with --account: a JSON array of the provider's components, a file or -")
	}
	var raw []byte
	var err error
	if src == "-" {
		raw, err = io.ReadAll(io.LimitReader(e.io.In, 1<<20))
	} else {
		raw, err = os.ReadFile(src)
	}
	if err != nil {
		return nil, usagef("--components: %v", err)
	}
	var comps []whatsapp.TemplateComponent
	if err := json.Unmarshal(raw, &comps); err != nil {
		return nil, usagef("--components: not a JSON array of components: %v", err)
	}
	return comps, nil
}

func templatesShowCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "show <template_id>",
		Short:   "Show a template: its status at the provider with its reason, quality, pauses and history",
		Example: "  parleyctl templates show 3 --company acme",
		Args:    exactArgs(1, "one template id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := parseID("template id", args[0])
		if err != nil {
			return err
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		t, err := cat.CompanyTemplate(ctx, co.ID, id)
		if errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("template %d not found in company %q", id, co.Slug)
		}
		if err != nil {
			return err
		}
		hist, err := cat.TemplateHistory(ctx, co.ID, id)
		if err != nil {
			return err
		}
		return e.showTemplate(co, t, hist)
	})
	companyFlag(c, &company)
	return c
}

// numberView is a number with its quality and its portfolio's limit.
type numberView struct {
	ID               int64  `json:"id"`
	Name             string `json:"name"`
	PhoneNumberID    string `json:"phone_number_id"`
	WABAID           string `json:"waba_id"`
	PortfolioID      string `json:"portfolio_id"`
	QualityRating    string `json:"quality_rating"`
	QualityUpdatedAt string `json:"quality_updated_at,omitempty"`
	Tier             string `json:"tier"`
	Limit            int    `json:"limit"`
	TierSource       string `json:"tier_source"`
}

// numbers flattens a company's portfolios into their numbers.
func numbers(cat *catalog.Store, ctx context.Context, companyID int64) ([]numberView, error) {
	ps, err := cat.Portfolios(ctx, companyID)
	if err != nil {
		return nil, err
	}
	var out []numberView
	for _, p := range ps {
		for _, n := range p.Numbers {
			v := numberView{ID: n.ID, Name: n.Name, PhoneNumberID: n.PhoneNumberID, WABAID: n.WABA(), PortfolioID: p.ID,
				QualityRating: n.QualityRating, Tier: p.Tier, Limit: p.Limit, TierSource: p.Source}
			if n.QualityUpdatedAt != nil {
				v.QualityUpdatedAt = fmtTime(*n.QualityUpdatedAt)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func limitText(limit int) string {
	if limit == 0 {
		return "unlimited"
	}
	return strconv.Itoa(limit)
}

func numbersCmd(e *env) *cobra.Command {
	return group("numbers", "List a company's numbers with their quality rating and messaging limit tier",
		companyList[numberView, numberView]{
			noun: "numbers", short: "List a company's numbers: quality rating, WABA, portfolio and its messaging limit tier",
			empty: "no numbers", header: []string{"ID", "NAME", "PHONE NUMBER ID", "WABA", "QUALITY", "PORTFOLIO", "TIER", "LIMIT", "TIER FROM"},
			load: numbers,
			each: func(v numberView) (numberView, []string) {
				return v, []string{fmtID(v.ID), v.Name, v.PhoneNumberID, v.WABAID, v.QualityRating, v.PortfolioID, v.Tier,
					limitText(v.Limit), orDash(v.TierSource)}
			},
		}.cmd(e))
}

func portfoliosCmd(e *env) *cobra.Command {
	return group("portfolios", "Set a business portfolio's messaging limit tier", portfoliosSetTierCmd(e))
}

func portfoliosSetTierCmd(e *env) *cobra.Command {
	var company, tier string
	c := &cobra.Command{
		Use:   "set-tier <portfolio_id>",
		Short: "Set a portfolio's messaging limit tier as the operator (the provider's next word replaces it)",
		Example: `  parleyctl portfolios set-tier 7001 --company acme --tier TIER_2K
  parleyctl numbers list --company acme    # the portfolio ids are there`,
		Args: exactArgs(1, "one portfolio id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		if _, ok := whatsapp.TierLimit(tier); !ok {
			return usagef("--tier %q: TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED", tier)
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		err = cat.SetPortfolioTier(ctx, co.ID, args[0], tier, catalog.TierFromOperator)
		if errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("portfolio %s: none of company %q's numbers is in it (see parleyctl numbers list)", args[0], co.Slug)
		}
		if err != nil {
			return err
		}
		nums, err := numbers(cat, ctx, co.ID)
		if err != nil {
			return err
		}
		var in []numberView
		for _, n := range nums {
			if n.PortfolioID == args[0] {
				in = append(in, n)
			}
		}
		return e.emit(in, func(w io.Writer) {
			fmt.Fprintf(w, "portfolio %s: %s (%s unique users in 24 hours), set by the operator, for %d numbers\n",
				args[0], tier, limitText(in[0].Limit), len(in))
		})
	})
	companyFlag(c, &company)
	c.Flags().StringVar(&tier, "tier", "", "TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED (required)")
	_ = c.MarkFlagRequired("tier")
	return c
}
