package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/adminapi"
)

// endpointView is a webhook endpoint as shown: never its secret.
type endpointView struct {
	ID             string     `json:"id"`
	CompanyID      int64      `json:"company_id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	EventTypes     []string   `json:"event_types"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason"`
	LastError      string     `json:"last_error"`
	SecretHint     string     `json:"secret_hint"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	DisabledAt     *time.Time `json:"disabled_at"`
}

func viewEndpoint(ep webhooks.Endpoint) endpointView {
	return endpointView{ID: ep.ID, CompanyID: ep.CompanyID, URL: ep.URL, Description: ep.Description, EventTypes: ep.EventTypes,
		Enabled: ep.Enabled, DisabledReason: ep.DisabledReason, LastError: ep.LastError, SecretHint: ep.SecretHint,
		CreatedAt: ep.CreatedAt, UpdatedAt: ep.UpdatedAt, DisabledAt: ep.DisabledAt}
}

// newSecretView is an endpoint with its secret: the only time it is shown.
type newSecretView struct {
	Secret string `json:"secret"`
	endpointView
	// PreviousExpiresAt is when the rotated-out secret stops signing.
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty"`
}

func eventTypesText(types []string) string {
	if len(types) == 0 {
		return "all"
	}
	return strings.Join(types, ",")
}

func (e *env) webhookStore(ctx context.Context) (*webhooks.Store, error) {
	pool, box, err := e.sealed(ctx)
	if err != nil {
		return nil, err
	}
	return webhooks.NewStore(pool, box, e.cfg.Webhooks), nil
}

// companyWebhooks resolves --company and opens the webhook store.
func (e *env) companyWebhooks(ctx context.Context, company string) (catalog.Company, *webhooks.Store, error) {
	_, co, err := e.withCompany(ctx, company)
	if err != nil {
		return catalog.Company{}, nil, err
	}
	s, err := e.webhookStore(ctx)
	return co, s, err
}

// webhookErr words the store's errors for the operator: bad input is a
// usage mistake (exit 2), the rest failures.
func webhookErr(co catalog.Company, id string, err error) error {
	var ve *webhooks.ValidationError
	switch {
	case errors.As(err, &ve):
		parts := make([]string, len(ve.Fields))
		for i, f := range ve.Fields {
			parts[i] = "--" + strings.ReplaceAll(f.Field, "_", "-") + ": " + f.Msg
		}
		return usagef("%s", strings.Join(parts, "; "))
	case errors.Is(err, webhooks.ErrNotFound):
		return fmt.Errorf("company %q has no webhook endpoint %q", co.Slug, id)
	case errors.Is(err, webhooks.ErrTooManyEndpoints):
		return fmt.Errorf("company %q already has the most webhook endpoints allowed (PARLEY_WEBHOOKS_MAX_ENDPOINTS)", co.Slug)
	case errors.Is(err, webhooks.ErrDisabled):
		return fmt.Errorf("webhook endpoint %q is disabled; enable it first (parleyctl webhooks enable %s --company %s)", id, id, co.Slug)
	}
	return err
}

func (e *env) showSecret(co catalog.Company, v newSecretView) error {
	return e.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "Signing secret of webhook endpoint %s of company %q (shown once: store it now):\n\n  %s\n\n", v.ID, co.Slug, v.Secret)
		pairs := []string{"id", v.ID, "url", v.URL, "event types", eventTypesText(v.EventTypes), "enabled", yesNo(v.Enabled)}
		if v.PreviousExpiresAt != nil {
			pairs = append(pairs, "previous secret signs until", fmtTime(*v.PreviousExpiresAt))
		}
		fields(w, pairs...)
	})
}

func (e *env) showEndpoint(v endpointView) error {
	return e.emit(v, func(w io.Writer) {
		pairs := []string{"id", v.ID, "url", v.URL, "description", orDash(v.Description), "event types", eventTypesText(v.EventTypes),
			"enabled", yesNo(v.Enabled), "secret", "whsec_…" + v.SecretHint}
		if v.DisabledReason != "" {
			pairs = append(pairs, "disabled because", v.DisabledReason)
		}
		if v.LastError != "" {
			pairs = append(pairs, "last error", v.LastError)
		}
		fields(w, pairs...)
	})
}

func webhooksCmd(e *env) *cobra.Command {
	return group("webhooks", "Manage companies' webhook endpoints (signed Standard Webhooks events)",
		webhooksCreateCmd(e), webhooksListCmd(e), webhooksUpdateCmd(e), webhooksDeleteCmd(e), webhooksRotateCmd(e),
		webhooksEnableCmd(e), webhooksReplayCmd(e), webhooksAttemptsCmd(e), webhooksTestCmd(e))
}

func endpointArg() cobra.PositionalArgs { return exactArgs(1, "one webhook endpoint id") }

func webhooksCreateCmd(e *env) *cobra.Command {
	var company, url, description string
	var types []string
	var disabled bool
	c := &cobra.Command{
		Use:   "create",
		Short: "Add a webhook endpoint; prints its signing secret once",
		Example: `  parleyctl webhooks create --company acme --url https://crm.acme.example/parley
  parleyctl webhooks create --company acme --url https://crm.acme.example/parley --event-types message.failed,batch.completed`,
		Args: noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			co, s, err := e.companyWebhooks(ctx, company)
			if err != nil {
				return err
			}
			enabled := !disabled
			secret, ep, err := s.Create(ctx, co.ID, webhooks.Input{URL: url, Description: description, EventTypes: types, Enabled: &enabled})
			if err != nil {
				return webhookErr(co, "", err)
			}
			return e.showSecret(co, newSecretView{Secret: secret, endpointView: viewEndpoint(ep)})
		}),
	}
	companyFlag(c, &company)
	c.Flags().StringVar(&url, "url", "", "the endpoint's https URL (required)")
	_ = c.MarkFlagRequired("url")
	c.Flags().StringVar(&description, "description", "", "what the endpoint is for")
	c.Flags().StringSliceVar(&types, "event-types", nil, "event types to send, comma separated (default: all)")
	c.Flags().BoolVar(&disabled, "disabled", false, "create it disabled")
	return c
}

func webhooksListCmd(e *env) *cobra.Command {
	return companyList[webhooks.Endpoint, endpointView]{
		noun: "webhooks", short: "List the company's webhook endpoints", empty: "no webhook endpoints",
		header: []string{"ID", "URL", "EVENT TYPES", "ENABLED", "LAST ERROR"},
		load: func(_ *catalog.Store, ctx context.Context, companyID int64) ([]webhooks.Endpoint, error) {
			s, err := e.webhookStore(ctx)
			if err != nil {
				return nil, err
			}
			return s.List(ctx, companyID)
		},
		each: func(ep webhooks.Endpoint) (endpointView, []string) {
			return viewEndpoint(ep), []string{ep.ID, ep.URL, eventTypesText(ep.EventTypes), yesNo(ep.Enabled), orDash(ep.LastError)}
		},
	}.cmd(e)
}

func webhooksUpdateCmd(e *env) *cobra.Command {
	var company, url, description string
	var types []string
	var allEvents, enabled bool
	var c *cobra.Command
	c = &cobra.Command{
		Use:   "update <endpoint_id>",
		Short: "Change an endpoint's URL, description, event types or enabled state",
		Example: `  parleyctl webhooks update 0193… --company acme --event-types message.failed
  parleyctl webhooks update 0193… --company acme --all-events --enabled=false`,
		Args: endpointArg(),
		RunE: run(func(ctx context.Context, args []string) error {
			var p webhooks.Patch
			fl := c.Flags()
			if fl.Changed("url") {
				p.URL = &url
			}
			if fl.Changed("description") {
				p.Description = &description
			}
			switch {
			case fl.Changed("event-types") && allEvents:
				return usagef("give --event-types or --all-events, not both")
			case fl.Changed("event-types"):
				p.EventTypes = &types
			case allEvents:
				p.EventTypes = &[]string{}
			}
			if fl.Changed("enabled") {
				p.Enabled = &enabled
			}
			if p == (webhooks.Patch{}) {
				return usagef("nothing to update: give --url, --description, --event-types, --all-events or --enabled")
			}
			co, s, err := e.companyWebhooks(ctx, company)
			if err != nil {
				return err
			}
			ep, err := s.Update(ctx, co.ID, args[0], p)
			if err != nil {
				return webhookErr(co, args[0], err)
			}
			return e.showEndpoint(viewEndpoint(ep))
		}),
	}
	companyFlag(c, &company)
	c.Flags().StringVar(&url, "url", "", "the endpoint's new https URL")
	c.Flags().StringVar(&description, "description", "", "a new description")
	c.Flags().StringSliceVar(&types, "event-types", nil, "the event types to send, comma separated")
	c.Flags().BoolVar(&allEvents, "all-events", false, "send every event type")
	c.Flags().BoolVar(&enabled, "enabled", true, "enable (true) or disable (false) the endpoint")
	return c
}

// endpointCmd is a command on one endpoint of a company.
func endpointCmd(e *env, use, short, example string, body func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error) (*cobra.Command, *string) {
	var company string
	c := &cobra.Command{
		Use:     use + " <endpoint_id>",
		Short:   short,
		Example: example,
		Args:    endpointArg(),
		RunE: run(func(ctx context.Context, args []string) error {
			co, s, err := e.companyWebhooks(ctx, company)
			if err != nil {
				return err
			}
			if err := body(ctx, co, s, args[0]); err != nil {
				return webhookErr(co, args[0], err)
			}
			return nil
		}),
	}
	companyFlag(c, &company)
	return c, &company
}

func webhooksDeleteCmd(e *env) *cobra.Command {
	c, _ := endpointCmd(e, "delete", "Remove an endpoint with its secrets, deliveries and attempts",
		"  parleyctl webhooks delete 0193… --company acme",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			if err := s.Delete(ctx, co.ID, id); err != nil {
				return err
			}
			return e.emit(map[string]string{"deleted": id}, func(w io.Writer) { fmt.Fprintf(w, "deleted webhook endpoint %s\n", id) })
		})
	return c
}

func webhooksRotateCmd(e *env) *cobra.Command {
	c, _ := endpointCmd(e, "rotate-secret", "Give an endpoint a new signing secret (printed once); the previous one signs too for 24 hours",
		"  parleyctl webhooks rotate-secret 0193… --company acme",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			secret, ep, err := s.RotateSecret(ctx, co.ID, id)
			if err != nil {
				return err
			}
			until := s.Now().UTC().Add(webhooks.RotationOverlap)
			return e.showSecret(co, newSecretView{Secret: secret, endpointView: viewEndpoint(ep), PreviousExpiresAt: &until})
		})
	return c
}

func webhooksEnableCmd(e *env) *cobra.Command {
	c, _ := endpointCmd(e, "enable", "Re-enable an endpoint (after the sender disabled it); replay its failed deliveries with `webhooks replay`",
		"  parleyctl webhooks enable 0193… --company acme",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			ep, err := s.Enable(ctx, co.ID, id)
			if err != nil {
				return err
			}
			return e.showEndpoint(viewEndpoint(ep))
		})
	return c
}

// parseTimeFlag reads an RFC 3339 time or a duration before now ("24h").
func parseTimeFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, usagef("--%s is required (RFC 3339, e.g. 2026-11-24T10:00:00Z, or a duration ago, e.g. 24h)", name)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2026-11-24T10:00:00Z) or a duration ago (24h)", name, v)
}

func webhooksReplayCmd(e *env) *cobra.Command {
	var from, to string
	c, _ := endpointCmd(e, "replay", "Send again the endpoint's failed deliveries created within [--from, --to)",
		"  parleyctl webhooks replay 0193… --company acme --from 2026-11-24T00:00:00Z --to 2026-11-25T00:00:00Z\n  parleyctl webhooks replay 0193… --company acme --from 72h --to 0s",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			now := s.Now()
			f, err := parseTimeFlag("from", from, now)
			if err != nil {
				return err
			}
			t, err := parseTimeFlag("to", to, now)
			if err != nil {
				return err
			}
			n, err := s.ReplayFailed(ctx, co.ID, id, f, t)
			if err != nil {
				return err
			}
			return e.emit(map[string]int64{"queued": n}, func(w io.Writer) {
				fmt.Fprintf(w, "queued %d failed deliveries of webhook endpoint %s again\n", n, id)
			})
		})
	c.Flags().StringVar(&from, "from", "", "start of the range (RFC 3339, or a duration ago such as 24h)")
	c.Flags().StringVar(&to, "to", "0s", "end of the range, excluded (default now)")
	return c
}

func webhooksAttemptsCmd(e *env) *cobra.Command {
	var limit int
	var cursor int64
	c, _ := endpointCmd(e, "attempts", "List the endpoint's delivery attempts, newest first",
		"  parleyctl webhooks attempts 0193… --company acme --limit 20",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			if limit < 1 || limit > 1000 {
				return usagef("--limit must be from 1 to 1000")
			}
			atts, next, err := s.Attempts(ctx, co.ID, id, cursor, limit)
			if err != nil {
				return err
			}
			views := make([]adminapi.Attempt, len(atts))
			rows := make([][]string, len(atts))
			for i, a := range atts {
				views[i] = adminapi.ToAttempt(a)
				code := "-"
				if a.ResponseCode != nil {
					code = strconv.Itoa(*a.ResponseCode)
				}
				detail := a.Error
				if detail == "" {
					detail = a.Excerpt
				}
				if len(detail) > 60 {
					detail = detail[:60] + "…"
				}
				rows[i] = []string{fmtTime(a.AttemptedAt), a.EventType, a.EventID, string(a.Status), code, strconv.Itoa(a.LatencyMS) + " ms", orDash(detail)}
			}
			out := map[string]any{"attempts": views, "next_cursor": nil}
			if next != 0 {
				out["next_cursor"] = next
			}
			return e.emit(out, func(w io.Writer) {
				table(w, "no delivery attempts", []string{"WHEN", "EVENT TYPE", "EVENT ID", "STATUS", "CODE", "LATENCY", "DETAIL"}, rows)
				if next != 0 {
					fmt.Fprintf(w, "more: --cursor %d\n", next)
				}
			})
		})
	c.Flags().IntVar(&limit, "limit", 50, "attempts per page (1 to 1000)")
	c.Flags().Int64Var(&cursor, "cursor", 0, "the next page's cursor, from the previous page")
	return c
}

func webhooksTestCmd(e *env) *cobra.Command {
	var eventType string
	c, _ := endpointCmd(e, "test", "Queue a test event for this endpoint only (webhook.test, or --event-type with sample data)",
		"  parleyctl webhooks test 0193… --company acme\n  parleyctl webhooks test 0193… --company acme --event-type message.failed",
		func(ctx context.Context, co catalog.Company, s *webhooks.Store, id string) error {
			d, err := s.SendTest(ctx, co.ID, id, eventType)
			if err != nil {
				return err
			}
			v := map[string]any{"delivery_id": d.ID, "event_id": d.EventID, "event_type": d.EventType, "status": string(d.Status)}
			return e.emit(v, func(w io.Writer) {
				fmt.Fprintf(w, "queued test event %s (%s) for webhook endpoint %s; see it with `parleyctl webhooks attempts %s --company %s`\n",
					d.EventID, d.EventType, id, id, co.Slug)
			})
		})
	c.Flags().StringVar(&eventType, "event-type", "", "the event type to send (default webhook.test)")
	return c
}
