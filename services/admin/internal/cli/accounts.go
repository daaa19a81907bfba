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
)

// accountView is a messaging account as shown; its token never is.
type accountView struct {
	ID                  int64     `json:"id"`
	CompanyID           int64     `json:"company_id"`
	Name                string    `json:"name"`
	PhoneNumberID       string    `json:"phone_number_id"`
	WABAID              string    `json:"waba_id"`
	PortfolioID         string    `json:"portfolio_id"`
	Connected           bool      `json:"connected"`
	Timezone            string    `json:"timezone"`
	DeliveryWindow      *string   `json:"delivery_window"`
	ThroughputPerSecond int       `json:"throughput_per_second"`
	CreatedAt           time.Time `json:"created_at"`
}

func viewAccount(a catalog.MessagingAccount) accountView {
	v := accountView{ID: a.ID, CompanyID: a.CompanyID, Name: a.Name, PhoneNumberID: a.PhoneNumberID, WABAID: a.WABA(), PortfolioID: a.Portfolio(), Connected: a.Connected,
		Timezone: a.Timezone, ThroughputPerSecond: a.ThroughputPerSecond, CreatedAt: a.CreatedAt}
	if a.Window != nil {
		w := formatWindow(*a.Window)
		v.DeliveryWindow = &w
	}
	return v
}

// parseWindow reads "09:00-20:00" (local wall clock; an end before the start
// wraps midnight).
func parseWindow(s string) (catalog.DeliveryWindow, error) {
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return catalog.DeliveryWindow{}, fmt.Errorf("delivery window %q: want HH:MM-HH:MM, e.g. 09:00-20:00", s)
	}
	start, err1 := parseClock(from)
	end, err2 := parseClock(to)
	if err := errors.Join(err1, err2); err != nil {
		return catalog.DeliveryWindow{}, fmt.Errorf("delivery window %q: %w", s, err)
	}
	if start == end {
		return catalog.DeliveryWindow{}, fmt.Errorf("delivery window %q is empty: start and end are equal", s)
	}
	return catalog.DeliveryWindow{Start: start, End: end}, nil
}

func parseClock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

func formatWindow(w catalog.DeliveryWindow) string {
	clock := func(d time.Duration) string {
		return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return clock(w.Start) + "-" + clock(w.End)
}

func (e *env) showAccount(co catalog.Company, a catalog.MessagingAccount) error {
	v := viewAccount(a)
	return e.emit(v, func(w io.Writer) {
		window := "any time"
		if v.DeliveryWindow != nil {
			window = *v.DeliveryWindow
		}
		fields(w, "id", fmtID(v.ID), "company", co.Slug, "name", v.Name, "phone number id", v.PhoneNumberID,
			"waba", v.WABAID, "portfolio", v.PortfolioID, "connected", yesNo(v.Connected), "timezone", v.Timezone, "delivery window", window,
			"throughput", strconv.Itoa(v.ThroughputPerSecond)+"/s", "created", fmtTime(v.CreatedAt))
	})
}

func accountsCmd(e *env) *cobra.Command {
	return group("accounts", "Connect and list messaging accounts (WhatsApp Business phone numbers)",
		accountsCreateCmd(e), accountsListCmd(e), accountsUpdateCmd(e))
}

func accountsCreateCmd(e *env) *cobra.Command {
	var company, name, phoneNumberID, token, tz, window, wabaID, portfolioID string
	var tokenStdin, connected bool
	var throughput int
	c := &cobra.Command{
		Use:   "create",
		Short: "Connect a phone number; its access token is stored encrypted and never shown",
		Example: `  PARLEY_ACCOUNT_ACCESS_TOKEN=... parleyctl accounts create --company acme --phone-number-id 106540352242922 \
      --timezone Europe/Paris --delivery-window 09:00-20:00 --throughput 80
  parleyctl accounts create --company acme --phone-number-id 106540352242923 --access-token-stdin < token.txt`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		if !digitsRe.MatchString(phoneNumberID) {
			return usagef("--phone-number-id %q: the provider's numeric id, digits only", phoneNumberID)
		}
		for flag, v := range map[string]string{"--waba-id": wabaID, "--portfolio-id": portfolioID} {
			if v != "" && !digitsRe.MatchString(v) {
				return usagef("%s %q: digits only", flag, v)
			}
		}
		n := catalog.NewMessagingAccount{Name: name, PhoneNumberID: phoneNumberID, Connected: connected, Timezone: tz,
			ThroughputPerSecond: throughput, WABAID: wabaID, PortfolioID: portfolioID}
		if n.Name == "" {
			n.Name = "WhatsApp " + phoneNumberID
		}
		if _, err := time.LoadLocation(tz); err != nil {
			return usagef("--timezone %q is not an IANA time zone (e.g. Europe/Paris)", tz)
		}
		if throughput < 1 {
			return usagef("--throughput must be at least 1 message per second")
		}
		if window != "" {
			w, err := parseWindow(window)
			if err != nil {
				return usageError{err}
			}
			n.Window = &w
		}
		switch {
		case c.Flags().Changed("access-token") && tokenStdin:
			return usagef("give --access-token or --access-token-stdin, not both")
		case c.Flags().Changed("access-token"):
			n.AccessToken = token
		case tokenStdin:
			var err error
			if n.AccessToken, err = e.readSecret("Access token: "); err != nil {
				return err
			}
		default:
			cfg, err := e.config()
			if err != nil {
				return err
			}
			n.AccessToken = cfg.AccountAccessToken
		}
		if n.AccessToken == "" {
			return usagef("no access token: give --access-token-stdin, set PARLEY_ACCOUNT_ACCESS_TOKEN, or --access-token")
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		n.CompanyID = co.ID
		a, err := cat.CreateMessagingAccount(ctx, n)
		if errors.Is(err, catalog.ErrConflict) {
			return fmt.Errorf("messaging account with phone number id %s already exists", phoneNumberID)
		}
		if err != nil {
			return err
		}
		return e.showAccount(co, a)
	})
	companyFlag(c, &company)
	f := c.Flags()
	f.StringVar(&name, "name", "", `display name (default "WhatsApp <phone number id>")`)
	f.StringVar(&phoneNumberID, "phone-number-id", "", "the provider's phone number id (required)")
	f.StringVar(&token, "access-token", "", "the Bearer token (visible in the process list: prefer --access-token-stdin or PARLEY_ACCOUNT_ACCESS_TOKEN)")
	f.BoolVar(&tokenStdin, "access-token-stdin", false, "read the Bearer token from stdin")
	f.BoolVar(&connected, "connected", true, "the account may send (--connected=false to add it disconnected)")
	f.StringVar(&tz, "timezone", "UTC", "IANA time zone the delivery window is read in")
	f.StringVar(&window, "delivery-window", "", "local hours in which campaign messages may go out, e.g. 09:00-20:00 (default: any time)")
	f.IntVar(&throughput, "throughput", 80, "messages per second the provider allows this number")
	f.StringVar(&wabaID, "waba-id", "", "the number's WhatsApp Business Account id, where its templates are (default: the phone number id)")
	f.StringVar(&portfolioID, "portfolio-id", "", "the business portfolio whose messaging limit it shares (default: the WABA id)")
	_ = c.MarkFlagRequired("phone-number-id")
	return c
}

func accountsListCmd(e *env) *cobra.Command {
	return companyList[catalog.MessagingAccount, accountView]{
		noun: "accounts", short: "List a company's messaging accounts", empty: "no messaging accounts",
		header: []string{"ID", "NAME", "PHONE NUMBER ID", "CONNECTED", "TIMEZONE", "WINDOW", "MSG/S", "CREATED"},
		load:   (*catalog.Store).MessagingAccounts,
		each: func(a catalog.MessagingAccount) (accountView, []string) {
			v := viewAccount(a)
			window := "-"
			if v.DeliveryWindow != nil {
				window = *v.DeliveryWindow
			}
			return v, []string{fmtID(v.ID), v.Name, v.PhoneNumberID, yesNo(v.Connected), v.Timezone, window, strconv.Itoa(v.ThroughputPerSecond), fmtTime(v.CreatedAt)}
		},
	}.cmd(e)
}

func accountsUpdateCmd(e *env) *cobra.Command {
	var company, tz, window string
	var connected bool
	var throughput int
	c := &cobra.Command{
		Use:   "update <account_id>",
		Short: "Change an account's connection, time zone, delivery window or throughput",
		Example: `  parleyctl accounts update 4 --company acme --connected=false
  parleyctl accounts update 4 --company acme --delivery-window none --throughput 40`,
		Args: exactArgs(1, "one messaging account id"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil {
			return usagef("account id %q is not a number", args[0])
		}
		var u catalog.AccountUpdate
		f := c.Flags()
		if f.Changed("connected") {
			u.Connected = &connected
		}
		if f.Changed("timezone") {
			if _, err := time.LoadLocation(tz); err != nil {
				return usagef("--timezone %q is not an IANA time zone (e.g. Europe/Paris)", tz)
			}
			u.Timezone = &tz
		}
		if f.Changed("delivery-window") {
			if window == "none" || window == "" {
				u.ClearWindow = true
			} else {
				w, err := parseWindow(window)
				if err != nil {
					return usageError{err}
				}
				u.Window = &w
			}
		}
		if f.Changed("throughput") {
			if throughput < 1 {
				return usagef("--throughput must be at least 1 message per second")
			}
			u.ThroughputPerSecond = &throughput
		}
		if u == (catalog.AccountUpdate{}) {
			return usagef("nothing to update: give --connected, --timezone, --delivery-window or --throughput")
		}
		cat, co, err := e.withCompany(ctx, company)
		if err != nil {
			return err
		}
		// Accounts are updated by id alone: check ownership first.
		a, err := cat.MessagingAccount(ctx, id)
		if errors.Is(err, catalog.ErrNotFound) || (err == nil && a.CompanyID != co.ID) {
			return fmt.Errorf("messaging account %d not found in company %q", id, co.Slug)
		}
		if err != nil {
			return err
		}
		a, err = cat.UpdateMessagingAccount(ctx, id, u)
		if err != nil {
			return err
		}
		return e.showAccount(co, a)
	})
	companyFlag(c, &company)
	f := c.Flags()
	f.BoolVar(&connected, "connected", true, "the account may send")
	f.StringVar(&tz, "timezone", "", "IANA time zone the delivery window is read in")
	f.StringVar(&window, "delivery-window", "", `local hours for campaign messages, e.g. 09:00-20:00, or "none"`)
	f.IntVar(&throughput, "throughput", 0, "messages per second the provider allows this number")
	return c
}
