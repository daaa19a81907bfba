package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
)

// keyView is a stored key as shown: masked, never its secret.
type keyView struct {
	KeyID       string     `json:"key_id"`
	CompanyID   int64      `json:"company_id"`
	Masked      string     `json:"masked"`
	State       string     `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	GraceEndsAt *time.Time `json:"grace_ends_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

func viewKey(k apikey.Key) keyView {
	return keyView{KeyID: k.KeyID, CompanyID: k.CompanyID, Masked: k.Masked(), State: string(k.State), CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, GraceEndsAt: k.GraceEndsAt, RevokedAt: k.RevokedAt}
}

// newKeyView is a key just made: the only time its full value is shown.
type newKeyView struct {
	APIKey string `json:"api_key"`
	keyView
	// Previous is the key a rotation replaced, valid until its grace ends.
	Previous *keyView `json:"previous,omitempty"`
}

func keyInvalidation(keyID string) bus.Invalidation {
	return bus.Invalidation{Kind: bus.KindAPIKey, ID: keyID}
}

func (e *env) showNewKey(co catalog.Company, v newKeyView) error {
	return e.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "API key of company %q (shown once: store it now; only its hash is kept):\n\n  %s\n\n", co.Slug, v.APIKey)
		pairs := []string{"key id", v.KeyID, "masked", v.Masked, "state", v.State, "created", fmtTime(v.CreatedAt)}
		if v.Previous != nil {
			pairs = append(pairs, "previous key", v.Previous.KeyID, "previous valid until", fmtTimePtr(v.Previous.GraceEndsAt))
		}
		fields(w, pairs...)
	})
}

func keysCmd(e *env) *cobra.Command {
	return group("keys", "Create, list, rotate and revoke company API keys",
		keysCreateCmd(e), keysListCmd(e), keysRotateCmd(e), keysRevokeCmd(e))
}

// companyKeys resolves --company and opens the key store.
func (e *env) companyKeys(ctx context.Context, company string) (catalog.Company, *apikey.Store, error) {
	_, co, err := e.withCompany(ctx, company)
	if err != nil {
		return catalog.Company{}, nil, err
	}
	ks, err := e.keys(ctx)
	return co, ks, err
}

func keysCreateCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "create",
		Short:   "Create the company's API key (it has none active); prints the full key once",
		Example: `  parleyctl keys create --company acme`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			co, ks, err := e.companyKeys(ctx, company)
			if err != nil {
				return err
			}
			full, k, err := ks.Create(ctx, co.ID, operator)
			if errors.Is(err, apikey.ErrActiveKeyExists) {
				return fmt.Errorf("company %q already has an active API key; rotate or revoke it", co.Slug)
			}
			if err != nil {
				return err
			}
			e.invalidate(ctx, keyInvalidation(k.KeyID))
			return e.showNewKey(co, newKeyView{APIKey: full, keyView: viewKey(k)})
		}),
	}
	companyFlag(c, &company)
	return c
}

func keysListCmd(e *env) *cobra.Command {
	return companyList[apikey.Key, keyView]{
		noun: "keys", short: "List the company's keys, masked, newest first", empty: "no API keys",
		header: []string{"KEY ID", "KEY", "STATE", "CREATED", "LAST USED", "GRACE ENDS"},
		load: func(_ *catalog.Store, ctx context.Context, companyID int64) ([]apikey.Key, error) {
			ks, err := e.keys(ctx)
			if err != nil {
				return nil, err
			}
			return ks.List(ctx, companyID)
		},
		each: func(k apikey.Key) (keyView, []string) {
			return viewKey(k), []string{k.KeyID, k.Masked(), string(k.State), fmtTime(k.CreatedAt), fmtTimePtr(k.LastUsedAt), fmtTimePtr(k.GraceEndsAt)}
		},
	}.cmd(e)
}

func keysRotateCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "rotate",
		Short:   "Replace the active key; the previous one keeps working for 24 hours",
		Example: `  parleyctl keys rotate --company acme`,
		Args:    noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			co, ks, err := e.companyKeys(ctx, company)
			if err != nil {
				return err
			}
			full, k, prev, err := ks.Rotate(ctx, co.ID, operator)
			if errors.Is(err, apikey.ErrNoActiveKey) {
				return fmt.Errorf("company %q has no active API key to rotate; create one with `parleyctl keys create --company %s`", co.Slug, co.Slug)
			}
			if err != nil {
				return err
			}
			e.invalidate(ctx, keyInvalidation(k.KeyID), keyInvalidation(prev.KeyID))
			pv := viewKey(prev)
			return e.showNewKey(co, newKeyView{APIKey: full, keyView: viewKey(k), Previous: &pv})
		}),
	}
	companyFlag(c, &company)
	return c
}

func keysRevokeCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:   "revoke <key_id>",
		Short: "Stop a key at once and for good (no grace)",
		Example: `  parleyctl keys revoke 3k9x0q2m7b1c5d8e
  parleyctl keys revoke 3k9x0q2m7b1c5d8e --company acme   # refuse if the key is another company's`,
		Args: exactArgs(1, "one key id (the part after service_, before the second _)"),
		RunE: run(func(ctx context.Context, args []string) error {
			keyID := args[0]
			ks, err := e.keys(ctx)
			if err != nil {
				return err
			}
			var companyID int64
			if company != "" {
				_, co, err := e.withCompany(ctx, company)
				if err != nil {
					return err
				}
				companyID = co.ID
			} else {
				k, err := ks.Lookup(ctx, keyID)
				if errors.Is(err, apikey.ErrNotFound) {
					return fmt.Errorf("API key %q not found", keyID)
				}
				if err != nil {
					return err
				}
				companyID = k.CompanyID
			}
			k, err := ks.Revoke(ctx, companyID, keyID, operator)
			switch {
			case errors.Is(err, apikey.ErrNotFound):
				return fmt.Errorf("API key %q not found", keyID)
			case errors.Is(err, apikey.ErrAlreadyRevoked):
				return fmt.Errorf("API key %q is already revoked", keyID)
			case err != nil:
				return err
			}
			e.invalidate(ctx, keyInvalidation(k.KeyID))
			v := viewKey(k)
			return e.emit(v, func(w io.Writer) {
				fmt.Fprintf(w, "revoked API key %s (%s); it stops working at once\n", v.KeyID, v.Masked)
			})
		}),
	}
	c.Flags().StringVar(&company, "company", "", "the company the key must belong to, by id or slug (optional)")
	return c
}
