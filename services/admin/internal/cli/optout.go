package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
)

// companyContacts resolves --company and opens the address book.
func (e *env) companyContacts(ctx context.Context, ref string) (catalog.Company, *contacts.Store, error) {
	_, co, err := e.withCompany(ctx, ref)
	if err != nil {
		return co, nil, err
	}
	pool, err := e.db(ctx)
	if err != nil {
		return co, nil, err
	}
	return co, contacts.NewStore(pool, nil), nil
}

func optOutCmd(e *env) *cobra.Command {
	return group("opt-out", "Show and set the words by which a company's contacts opt out of campaigns and back in",
		optOutShowCmd(e), optOutSetCmd(e), optOutResetCmd(e))
}

func (e *env) showOptOutSettings(co catalog.Company, s contacts.OptOutSettings) error {
	return e.emit(s, func(w io.Writer) {
		src := "the company's own"
		if s.Default {
			src = "the defaults"
		}
		fields(w, "company", co.Slug, "words", src,
			"opt-out keywords", strings.Join(s.OptOutKeywords, ", "),
			"opt-in keywords", strings.Join(s.OptInKeywords, ", "),
			"opt-out button payloads", strings.Join(s.OptOutPayloads, ", "))
	})
}

func optOutShowCmd(e *env) *cobra.Command {
	return optOutSettingsCmd(e, "show", "Show a company's opt-out and opt-in keywords and opt-out button payloads",
		(*contacts.Store).OptOutSettings)
}

func optOutResetCmd(e *env) *cobra.Command {
	return optOutSettingsCmd(e, "reset", "Put a company back on the default opt-out words",
		(*contacts.Store).ResetOptOutSettings)
}

// optOutSettingsCmd is a command that takes only --company and shows the
// company's opt-out settings as get returns them.
func optOutSettingsCmd(e *env, use, short string,
	get func(*contacts.Store, context.Context, int64) (contacts.OptOutSettings, error)) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  parleyctl opt-out " + use + " --company acme",
		Args:    noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		co, cs, err := e.companyContacts(ctx, company)
		if err != nil {
			return err
		}
		s, err := get(cs, ctx, co.ID)
		if err != nil {
			return err
		}
		return e.showOptOutSettings(co, s)
	})
	companyFlag(c, &company)
	return c
}

func optOutSetCmd(e *env) *cobra.Command {
	var company string
	var out, in, payloads []string
	c := &cobra.Command{
		Use:   "set",
		Short: "Replace some of a company's opt-out words; the lists not given are kept",
		Long: strings.TrimSpace(`
Each list given replaces the company's list (the first change starts from the
defaults). An inbound text equal to an opt-out keyword (case and surrounding
spaces ignored) opts the contact out of campaigns; an opt-in keyword opts them
back in; a quick-reply button whose payload is listed opts out. A word may not
be in both keyword lists. An empty value (--opt-in-keywords '') empties a list.`),
		Example: `  parleyctl opt-out set --company acme --keywords STOP,ARRET,BASTA --opt-in-keywords START,UNSTOP
  parleyctl opt-out set --company acme --button-payloads STOP_PROMOTIONS`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		f := c.Flags()
		if !f.Changed("keywords") && !f.Changed("opt-in-keywords") && !f.Changed("button-payloads") {
			return usagef("nothing to set: give --keywords, --opt-in-keywords or --button-payloads")
		}
		co, cs, err := e.companyContacts(ctx, company)
		if err != nil {
			return err
		}
		s, err := cs.OptOutSettings(ctx, co.ID)
		if err != nil {
			return err
		}
		if f.Changed("keywords") {
			s.OptOutKeywords = nonEmpty(out)
		}
		if f.Changed("opt-in-keywords") {
			s.OptInKeywords = nonEmpty(in)
		}
		if f.Changed("button-payloads") {
			s.OptOutPayloads = nonEmpty(payloads)
		}
		saved, err := cs.SetOptOutSettings(ctx, co.ID, s)
		if errors.Is(err, contacts.ErrInvalidSettings) {
			return usageError{err}
		}
		if err != nil {
			return err
		}
		return e.showOptOutSettings(co, saved)
	})
	companyFlag(c, &company)
	f := c.Flags()
	f.StringSliceVar(&out, "keywords", nil, "opt-out keywords, comma separated")
	f.StringSliceVar(&in, "opt-in-keywords", nil, "opt-in keywords, comma separated")
	f.StringSliceVar(&payloads, "button-payloads", nil, "quick-reply button payloads that opt out, comma separated")
	return c
}

// nonEmpty drops the empty element a flag given as ” yields.
func nonEmpty(in []string) []string {
	if len(in) == 1 && strings.TrimSpace(in[0]) == "" {
		return []string{}
	}
	return in
}

func contactsCmd(e *env) *cobra.Command {
	return group("contacts", "Show a contact with its opt-out history; opt a contact out or in",
		contactsShowCmd(e), contactsConsentCmd(e, true), contactsConsentCmd(e, false))
}

// contactView is a contact with its opt-out history.
type contactView struct {
	contacts.Contact
	OptedOut      bool                    `json:"opted_out"`
	OptOutHistory []contacts.ConsentEvent `json:"opt_out_history"`
}

func (e *env) showContact(ctx context.Context, cs *contacts.Store, co catalog.Company, number string) error {
	c, err := cs.ByPhone(ctx, co.ID, number)
	switch {
	case errors.Is(err, contacts.ErrInvalidPhone):
		return usagef("%q is not a phone number (E.164, with or without '+')", number)
	case errors.Is(err, contacts.ErrNotFound):
		return fmt.Errorf("contact %s not found in company %q", number, co.Slug)
	case err != nil:
		return err
	}
	h, err := cs.OptOutHistory(ctx, co.ID, c.ID)
	if err != nil {
		return err
	}
	v := contactView{Contact: c, OptedOut: c.OptedOut(), OptOutHistory: h}
	return e.emit(v, func(w io.Writer) {
		fields(w, "id", fmtID(c.ID), "company", co.Slug, "phone", c.Phone, "name", strings.TrimSpace(c.FirstName+" "+c.LastName),
			"opted out", yesNo(c.OptedOut()), "opted out at", fmtTimePtr(c.OptedOutAt), "created", fmtTime(c.CreatedAt))
		fmt.Fprintln(w)
		rows := make([][]string, len(h))
		for i, ev := range h {
			change := "opt-in"
			if ev.OptedOut {
				change = "opt-out"
			}
			msg := ""
			if ev.MessageID != nil {
				msg = strconv.FormatInt(*ev.MessageID, 10)
			}
			rows[i] = []string{fmtTime(ev.OccurredAt), change, ev.Reason, ev.Keyword, ev.ProviderMessageID, msg}
		}
		table(w, "no opt-out history", []string{"WHEN", "CHANGE", "WHY", "KEYWORD", "PROVIDER MESSAGE ID", "MESSAGE"}, rows)
	})
}

func contactsShowCmd(e *env) *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "show <phone>",
		Short:   "Show a contact and its opt-out history (when, why, from which message)",
		Example: `  parleyctl contacts show +393331234567 --company acme`,
		Args:    exactArgs(1, "one phone number"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		co, cs, err := e.companyContacts(ctx, company)
		if err != nil {
			return err
		}
		return e.showContact(ctx, cs, co, args[0])
	})
	companyFlag(c, &company)
	return c
}

func contactsConsentCmd(e *env, out bool) *cobra.Command {
	var company string
	use, short := "opt-in <phone>", "Opt a contact back in to campaigns (reason operator, kept in its history)"
	if out {
		use, short = "opt-out <phone>", "Opt a contact out of campaigns (reason operator, kept in its history); creates the contact if needed"
	}
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  parleyctl contacts " + strings.Fields(use)[0] + " +393331234567 --company acme",
		Args:    exactArgs(1, "one phone number"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		co, cs, err := e.companyContacts(ctx, company)
		if err != nil {
			return err
		}
		_, err = cs.RecordConsent(ctx, contacts.ConsentChange{CompanyID: co.ID, Phone: args[0], OptedOut: out, Reason: contacts.ReasonOperator})
		if errors.Is(err, contacts.ErrInvalidPhone) {
			return usagef("%q is not a phone number (E.164, with or without '+')", args[0])
		}
		if err != nil {
			return err
		}
		return e.showContact(ctx, cs, co, args[0])
	})
	companyFlag(c, &company)
	return c
}
