package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/replies"
	"github.com/parleyhq/parley/services/admin/internal/conversations"
)

// The conversations commands read through the same pkg/record functions as
// GET /api/conversations, /api/contacts/{phone} and its messages, and reply
// through pkg/replies as POST /api/messages does (the same window rule).

func conversationsCmd(e *env) *cobra.Command {
	return group("conversations", "List a company's conversations, show one with both directions, reply inside the 24-hour window",
		conversationsListCmd(e), conversationsShowCmd(e), conversationsReplyCmd(e))
}

// companyConversations resolves --company and opens the conversations
// store; withStream also connects to the SENDS stream (replies).
func (e *env) companyConversations(ctx context.Context, ref string, withStream bool) (catalog.Company, *conversations.Store, error) {
	pool, co, err := e.companyDB(ctx, ref)
	if err != nil {
		return co, nil, err
	}
	if !withStream {
		return co, conversations.New(pool, nil, e.cfg.NATS, time.Now), nil
	}
	js, err := e.jetStream()
	if err != nil {
		return co, nil, err
	}
	return co, conversations.New(pool, js, e.cfg.NATS, time.Now), nil
}

// contactNumber reads a phone argument: E.164 with or without its +.
func contactNumber(arg string) (string, error) {
	n, ok := phone.Normalize(strings.TrimSpace(arg))
	if !ok {
		return "", usagef("%q is not a phone number (E.164, with or without '+')", arg)
	}
	return n, nil
}

// left is a countdown as an operator reads it: 3h12m, 12m, <1m.
func left(d time.Duration) string {
	if d < time.Minute {
		return "<1m"
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	if h == 0 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", h, m)
}

// windowText says whether a window is open and until when.
func windowText(w record.Window, now time.Time) string {
	if w.Open {
		return "open, ends in " + left(w.ExpiresAt.Sub(now))
	}
	return "closed at " + fmtTime(w.ExpiresAt)
}

// oneLine fits a message into a table cell: one line, at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func conversationsListCmd(e *env) *cobra.Command {
	var company, cursor string
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "List a company's conversations, the contact who wrote last first, with each window",
		Long: strings.TrimSpace(`
Lists the company's conversations (one per contact and number the contact
wrote to), the one whose contact wrote last first: the contact's phone and
name, the number, the contact's last message, when they sent it, and the
24-hour window in which a free-form reply is allowed. When more remain, the
command for the next page is printed last. --json prints the page of
GET /api/conversations.`),
		Example: `  parleyctl conversations list --company acme
  parleyctl conversations list --company acme --limit 20 --cursor djE6Y29udmVyc2F0aW9uczo...`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		if limit < 1 || limit > record.MaxPhoneLimit {
			return usagef("--limit must be 1 to %d", record.MaxPhoneLimit)
		}
		co, s, err := e.companyConversations(ctx, company, false)
		if err != nil {
			return err
		}
		now := time.Now()
		page, err := s.List(ctx, co.ID, limit, cursor)
		if err != nil {
			return invalidFilter(err)
		}
		rows := make([][]string, len(page.Conversations))
		for i, cv := range page.Conversations {
			rows[i] = []string{cv.Phone, orDash(conversations.DisplayName(cv.FirstName, cv.LastName, cv.ProfileName)),
				cv.MessagingAccountName, oneLine(cv.LastMessage.Summary, 48), fmtTime(cv.LastInboundAt), windowText(cv.Window, now)}
		}
		return e.emit(page, func(w io.Writer) {
			table(w, "no conversations: no contact has written to the company's numbers yet",
				[]string{"PHONE", "NAME", "NUMBER", "LAST MESSAGE", "WHEN", "WINDOW"}, rows)
			if page.NextCursor != nil {
				fmt.Fprintf(w, "\nmore: parleyctl conversations list --company %s --limit %d --cursor %s\n", co.Slug, limit, *page.NextCursor)
			}
		})
	})
	companyFlag(c, &company)
	c.Flags().IntVar(&limit, "limit", record.DefaultPhoneLimit, fmt.Sprintf("page size, 1 to %d", record.MaxPhoneLimit))
	c.Flags().StringVar(&cursor, "cursor", "", "the cursor a previous page printed")
	return c
}

func conversationsShowCmd(e *env) *cobra.Command {
	var company, cursor string
	var limit int
	c := &cobra.Command{
		Use:   "show <phone>",
		Short: "Show a contact (names, opt-out, windows) and its thread, both directions, oldest first",
		Long: strings.TrimSpace(`
Shows the company's contact of the number (its names, whether it opted out of
campaigns, the 24-hour window on each number it wrote to) and a page of the
conversation in both directions: the --limit most recent messages, printed
oldest first so that the newest is at the bottom. Each line has its time, its
direction (← from the contact, → to the contact), the number, what it says
(the text, "[image] caption", or the template a message was sent with), what
sent it (reply, campaign "...", automation "...") and its state with the
error when it failed. When older messages remain, the command for them is
printed last. --json prints {"contact": GET /api/contacts/{phone} or null,
"phone", "messages" (newest first, as GET /api/contacts/{phone}/messages),
"next_cursor"}.`),
		Example: `  parleyctl conversations show +14155550101 --company acme
  parleyctl conversations show 14155550101 --company acme --limit 10`,
		Args: exactArgs(1, "one phone number"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		number, err := contactNumber(args[0])
		if err != nil {
			return err
		}
		if limit < 1 || limit > record.MaxPhoneLimit {
			return usagef("--limit must be 1 to %d", record.MaxPhoneLimit)
		}
		co, s, err := e.companyConversations(ctx, company, false)
		if err != nil {
			return err
		}
		now := time.Now()
		t, err := s.Thread(ctx, co.ID, number, limit, cursor)
		if errors.Is(err, conversations.ErrNotFound) {
			return fmt.Errorf("no conversation with %s in company %q: no such contact and no message either way", number, co.Slug)
		}
		if err != nil {
			return invalidFilter(err)
		}
		return e.emit(t, func(w io.Writer) {
			showThread(w, co, t, now, limit)
		})
	})
	companyFlag(c, &company)
	c.Flags().IntVar(&limit, "limit", record.DefaultPhoneLimit, fmt.Sprintf("messages, 1 to %d", record.MaxPhoneLimit))
	c.Flags().StringVar(&cursor, "cursor", "", "the cursor of older messages a previous page printed")
	return c
}

func showThread(w io.Writer, co catalog.Company, t conversations.Thread, now time.Time, limit int) {
	f := []string{"phone", t.Phone}
	if ct := t.Contact; ct != nil {
		f = append(f, "name", orDash(strings.TrimSpace(ct.FirstName+" "+ct.LastName)), "profile name", orDash(ct.ProfileName))
		optedOut := "no"
		if ct.OptedOutAt != nil {
			optedOut = "yes, since " + fmtTime(*ct.OptedOutAt) + " (campaigns only: replies inside the window still go)"
		}
		f = append(f, "opted out", optedOut)
		if len(ct.Windows) == 0 {
			f = append(f, "window", "none: the contact never wrote to the company's numbers (only templates can be sent)")
		}
		for _, win := range ct.Windows {
			text := windowText(win, now)
			if win.Open {
				text += " (at " + fmtTime(win.ExpiresAt) + ")"
			}
			f = append(f, "window", fmt.Sprintf("%q: %s", win.MessagingAccountName, text))
		}
	} else {
		f = append(f, "contact", "none (not in the address book)")
	}
	fields(w, f...)
	fmt.Fprintln(w)
	lines := t.Lines()
	rows := make([][]string, len(lines))
	for i, l := range lines {
		dir, state, by := "← in", "-", "-"
		if !l.Inbound {
			dir, state, by = "→ out", l.State, l.Via
			if l.Failed() {
				var why []string
				if l.ErrorCode != nil {
					why = append(why, strconv.Itoa(*l.ErrorCode))
				}
				if l.ErrorTitle != "" {
					why = append(why, l.ErrorTitle)
				}
				if len(why) > 0 {
					state += ": " + strings.Join(why, " ")
				}
			}
		}
		rows[i] = []string{fmtTime(l.At), dir, orDash(l.Number), oneLine(l.Text, 60), by, state}
	}
	if len(rows) > 0 {
		fmt.Fprintln(w, "thread, oldest first (the newest at the bottom):")
	}
	table(w, "no messages either way yet", []string{"WHEN", "DIRECTION", "NUMBER", "MESSAGE", "BY", "STATE"}, rows)
	if t.NextCursor != nil {
		fmt.Fprintf(w, "\nolder: parleyctl conversations show %s --company %s --limit %d --cursor %s\n", t.Phone, co.Slug, limit, *t.NextCursor)
	}
}

// replyView is an accepted reply as --json prints it: the keys of POST
// /api/messages' 202.
type replyView struct {
	Status    string `json:"status"`
	MessageID int64  `json:"message_id"`
	BatchID   string `json:"batch_id"`
}

func conversationsReplyCmd(e *env) *cobra.Command {
	var company, text, from, tpl, language string
	var vars []string
	c := &cobra.Command{
		Use:   "reply <phone>",
		Short: "Send one message to a contact: a text inside its 24-hour window, or a template at any time",
		Long: strings.TrimSpace(`
Sends one message to the contact, as POST /api/messages does. --text is a
free-form message (1 to 4,096 characters), allowed only inside the contact's
24-hour customer service window on the number it goes from; outside it the
command fails (exit 1) saying when the window ended. --template sends one of
the company's templates (with --language when the name has several, and
--var name=value for its variables), allowed at any time. --from is the
number it goes from, by id or name; by default the number the contact wrote
to last. An opted-out contact can still be answered: opting out is about
campaigns. The reply goes through the SENDS stream to the automation
dispatcher; the command prints its message id and batch id (follow it with
conversations show, or batches show <batch_id>).`),
		Example: `  parleyctl conversations reply +14155550101 --company acme --text "Yes, it left our warehouse this morning."
  parleyctl conversations reply +14155550101 --company acme --from "Acme Support" --text "..."
  parleyctl conversations reply +14155550101 --company acme --template order_update --language en_US --var order_id=A-1001`,
		Args: exactArgs(1, "one phone number"),
	}
	c.RunE = run(func(ctx context.Context, args []string) error {
		number, err := contactNumber(args[0])
		if err != nil {
			return err
		}
		req := replies.Request{Phone: number}
		switch fl := c.Flags(); {
		case fl.Changed("text") == fl.Changed("template"):
			return usagef("give --text or --template (one of them)")
		case fl.Changed("text") && (fl.Changed("language") || fl.Changed("var")):
			return usagef("--language and --var go with --template")
		case fl.Changed("text"):
			if req.Session, err = conversations.TextSession(text); err != nil {
				return usagef("--text: %s", strings.TrimPrefix(err.Error(), "reply text: "))
			}
		default:
			if req.Template, err = templateReply(tpl, language, vars); err != nil {
				return err
			}
		}
		co, s, err := e.companyConversations(ctx, company, true)
		if err != nil {
			return err
		}
		if from != "" {
			if req.AccountID, err = e.accountRef(ctx, co, from); err != nil {
				return err
			}
		}
		acc, err := s.Reply(ctx, co.ID, replies.SourceParleyctl, req)
		if err != nil {
			return replyErr(co, from, tpl, acc, err)
		}
		return e.emit(replyView{Status: "accepted", MessageID: acc.MessageID, BatchID: acc.BatchID}, func(w io.Writer) {
			fmt.Fprintf(w, "reply to %s accepted: message %d, batch %s\n", number, acc.MessageID, acc.BatchID)
			fmt.Fprintf(w, "follow it: parleyctl conversations show %s --company %s\n", number, co.Slug)
		})
	})
	companyFlag(c, &company)
	fl := c.Flags()
	fl.StringVar(&text, "text", "", "a free-form text, 1 to 4,096 characters (inside the window only)")
	fl.StringVar(&tpl, "template", "", "the name of one of the company's templates (any time)")
	fl.StringVar(&language, "language", "", "the template's language, when its name has several")
	fl.StringArrayVar(&vars, "var", nil, "a template variable, name=value (repeat for more)")
	fl.StringVar(&from, "from", "", "the number it goes from, by id or name (default: the one the contact wrote to last)")
	return c
}

// templateReply reads --template, --language and --var as the API's
// template object.
func templateReply(name, language string, vars []string) (*replies.Template, error) {
	if !templateNameRe.MatchString(name) {
		return nil, usagef("--template %q: a template name is lowercase letters, digits and underscores", name)
	}
	if len(language) > 15 {
		return nil, usagef("--language %q: at most 15 characters", language)
	}
	t := &replies.Template{Name: name, Language: language}
	for _, kv := range vars {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("--var %q: write name=value", kv)
		}
		if t.Variables == nil {
			t.Variables = map[string]string{}
		}
		t.Variables[strings.TrimSpace(k)] = v
	}
	return t, nil
}

// accountRef finds the company's messaging account by id or name.
func (e *env) accountRef(ctx context.Context, co catalog.Company, ref string) (int64, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	cat, err := e.catalog(ctx)
	if err != nil {
		return 0, err
	}
	all, err := cat.MessagingAccounts(ctx, co.ID)
	if err != nil {
		return 0, err
	}
	var ids []string
	var found int64
	for _, a := range all {
		if a.Name == ref {
			found = a.ID
			ids = append(ids, fmtID(a.ID))
		}
	}
	switch len(ids) {
	case 0:
		return 0, fmt.Errorf("--from: company %q has no messaging account named %q (parleyctl accounts list --company %s)", co.Slug, ref, co.Slug)
	case 1:
		return found, nil
	}
	return 0, fmt.Errorf("--from: several of company %q's messaging accounts are named %q: give the id (%s)", co.Slug, ref, strings.Join(ids, ", "))
}

// replyErr says why a reply was not sent, in the operator's words; the
// window's refusal is the sentence the API answers.
func replyErr(co catalog.Company, from, tpl string, acc replies.Accepted, err error) error {
	var closed *replies.WindowClosedError
	var invalid *replies.InvalidError
	switch {
	case errors.As(err, &closed):
		return errors.New(closed.Error())
	case errors.As(err, &invalid):
		msgs := make([]string, len(invalid.Problems))
		for i, p := range invalid.Problems {
			msgs[i] = p.Msg
		}
		return errors.New(strings.Join(msgs, "; "))
	case errors.Is(err, replies.ErrAccountNotFound):
		return fmt.Errorf("--from: company %q has no messaging account %s", co.Slug, from)
	case errors.Is(err, replies.ErrTemplateNotFound):
		return fmt.Errorf("--template: company %q has no template %q (parleyctl templates list --company %s)", co.Slug, tpl, co.Slug)
	case acc.BatchID != "":
		return fmt.Errorf("the reply may not have been queued (batch %s; check with parleyctl batches show %s --company %s): %w",
			acc.BatchID, acc.BatchID, co.Slug, err)
	}
	return err
}
