package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/replies"
	"github.com/parleyhq/parley/services/admin/internal/conversations"
)

// PathConversations is the Conversations page, under Messaging.
const PathConversations = "/conversations"

const (
	// conversationsPerPage is how many conversations the list shows at a time.
	conversationsPerPage = 25
	// threadPerPage is how many messages a thread shows at a time.
	threadPerPage = 50
	// maxReplyFormBytes bounds the reply form: 4,096 characters of up to
	// four bytes, each percent-encoded (three characters a byte).
	maxReplyFormBytes = 64 << 10
)

// Who may reply: admins and members alike. Answering the customers who
// write is the members' daily work; a reply is one message to one contact
// who wrote within 24 hours, from the company's own number, and changes no
// configuration, so it is not reserved like keys, webhooks and cancels.
// requireUser is the whole check: a signed-in user of the company, read
// afresh from the database on every request.

func (c *Console) routeConversations(mux *http.ServeMux) {
	mux.Handle("GET "+PathConversations, c.requireUser(c.conversationsPage))
	mux.Handle("GET "+PathConversations+"/{phone}", c.requireUser(c.threadPage))
	mux.Handle("POST "+PathConversations+"/{phone}/reply", c.requireUser(c.reply))
}

// conversationsView is the Conversations page.
type conversationsView struct {
	Now           time.Time
	Conversations []record.Conversation
	// Older is the query string of the next page, "" on the last; Paged
	// says this is not the first page.
	Older string
	Paged bool
}

func (c *Console) conversationsPage(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	cursor := r.URL.Query().Get("cursor")
	page, err := c.Conversations.List(r.Context(), u.CompanyID, conversationsPerPage, cursor)
	var invalid *record.InvalidError
	if errors.As(err, &invalid) {
		c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the Conversations page again.")
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := conversationsView{Now: c.now(), Conversations: page.Conversations, Paged: cursor != ""}
	if page.NextCursor != nil {
		v.Older = "?cursor=" + url.QueryEscape(*page.NextCursor)
	}
	c.renderPage(w, r, http.StatusOK, c.pages.conversations, "Conversations", "conversations", v)
}

// threadView is one contact's conversation.
type threadView struct {
	Now   time.Time
	Phone string
	// Name is how the contact is named, "" when only its number is known.
	Name    string
	Contact *record.ContactView
	// Lines are the messages, oldest first; a reply still waiting for a
	// dispatcher is last.
	Lines []conversations.Line
	// Older is the query string of older messages, "" when there are none;
	// Paged says the page is not the latest.
	Older string
	Paged bool
	// Open are the windows a reply may go through, the most recent first.
	Open  []record.Window
	Reply replyForm
}

// Windows are the contact's windows, one per number it wrote to.
func (v threadView) Windows() []record.Window {
	if v.Contact == nil {
		return nil
	}
	return v.Contact.Windows
}

// replyForm is what was typed in the reply box, and why it was refused.
type replyForm struct {
	Text  string
	From  int64
	Error string
}

// conversationNumber reads the {phone} of the path, or answers 404.
func (c *Console) conversationNumber(w http.ResponseWriter, r *http.Request) (string, bool) {
	n, ok := phone.Normalize(r.PathValue("phone"))
	if !ok {
		c.renderError(w, r, http.StatusNotFound, "Conversation not found", "This is not a phone number your company has a conversation with.")
	}
	return n, ok
}

func (c *Console) threadPage(w http.ResponseWriter, r *http.Request) {
	number, ok := c.conversationNumber(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	c.renderThread(w, r, http.StatusOK, number, replyForm{}, q.Get("cursor"), q.Get("reply"))
}

// renderThread renders the thread of number with the reply form; reply is
// the batch id of a reply just accepted, shown while it waits in the stream.
func (c *Console) renderThread(w http.ResponseWriter, r *http.Request, status int, number string, form replyForm, cursor, reply string) {
	u := currentUser(r.Context())
	ctx := r.Context()
	// The stream first, then the record: a dispatcher records a reply
	// before it removes it from the stream, so it is seen in one or the
	// other.
	var pending *conversations.Line
	if reply != "" && cursor == "" {
		var err error
		if pending, err = c.Conversations.Pending(ctx, u.CompanyID, number, reply); err != nil {
			c.Log.Warn("look up a reply in the stream", zap.Int64("company_id", u.CompanyID), zap.String("batch_id", reply), zap.Error(err))
		}
	}
	t, err := c.Conversations.Thread(ctx, u.CompanyID, number, threadPerPage, cursor)
	var invalid *record.InvalidError
	switch {
	case errors.Is(err, conversations.ErrNotFound):
		c.renderError(w, r, http.StatusNotFound, "Conversation not found", "Your company has no conversation with this number.")
		return
	case errors.As(err, &invalid):
		c.renderError(w, r, http.StatusBadRequest, "Page not found", "This list position is not valid. Open the conversation again.")
		return
	case err != nil:
		c.serverError(w, r, err)
		return
	}
	v := threadView{Now: c.now(), Phone: number, Contact: t.Contact, Lines: t.Lines(), Paged: cursor != "", Reply: form}
	if pending != nil && !t.Has(pending.ID) {
		v.Lines = append(v.Lines, *pending)
	}
	if t.NextCursor != nil {
		v.Older = "?cursor=" + url.QueryEscape(*t.NextCursor)
	}
	if ct := t.Contact; ct != nil {
		v.Name = conversations.DisplayName(ct.FirstName, ct.LastName, ct.ProfileName)
		for _, win := range ct.Windows {
			if win.Open {
				v.Open = append(v.Open, win)
			}
		}
	}
	title := v.Name
	if title == "" {
		title = number
	}
	c.renderPage(w, r, status, c.pages.thread, title, "conversations", v)
}

// reply sends the reply box's text to the contact, from the number chosen
// (a window open at the time the page was drawn). Admins and members may
// reply (see above); outside the window it is refused with 422 and the
// reason, the text kept in the box.
func (c *Console) reply(w http.ResponseWriter, r *http.Request) {
	number, ok := c.conversationNumber(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxReplyFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "The form could not be read", "Please go back and try again.")
		return
	}
	form := replyForm{Text: r.PostForm.Get("text")}
	if f := r.PostForm.Get("from"); f != "" {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id < 1 {
			form.Error = "Choose the number to reply from in the list."
			c.renderThread(w, r, http.StatusUnprocessableEntity, number, form, "", "")
			return
		}
		form.From = id
	}
	session, err := conversations.TextSession(form.Text)
	if err != nil {
		form.Error = textProblem(err)
		c.renderThread(w, r, http.StatusUnprocessableEntity, number, form, "", "")
		return
	}
	u := currentUser(r.Context())
	acc, err := c.Conversations.Reply(r.Context(), u.CompanyID, replies.SourceConsole, replies.Request{Phone: number, AccountID: form.From, Session: session})
	var closed *replies.WindowClosedError
	var invalid *replies.InvalidError
	switch {
	case err == nil:
		c.Log.Info("reply sent from the console", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID),
			zap.Int64("message_id", acc.MessageID), zap.String("batch_id", acc.BatchID))
		c.flash(r, true, "Reply accepted: it goes out in a moment and appears below with its delivery state.")
		http.Redirect(w, r, PathConversations+"/"+url.PathEscape(number)+"?reply="+url.QueryEscape(acc.BatchID)+"#latest", http.StatusSeeOther)
		return
	case errors.As(err, &closed):
		form.Error = closed.Error()
	case errors.As(err, &invalid):
		msgs := make([]string, len(invalid.Problems))
		for i, p := range invalid.Problems {
			msgs[i] = p.Msg
		}
		form.Error = strings.Join(msgs, "; ")
	case errors.Is(err, replies.ErrAccountNotFound):
		form.Error = "That number is not one of your company's. Choose one from the list."
	default:
		c.Log.Error("reply from the console not queued", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID),
			zap.String("batch_id", acc.BatchID), zap.Error(err))
		form.Error = "Your reply was not sent: the message queue did not take it. Please try again in a moment."
		c.renderThread(w, r, http.StatusServiceUnavailable, number, form, "", "")
		return
	}
	c.renderThread(w, r, http.StatusUnprocessableEntity, number, form, "", "")
}

// textProblem says in a person's words why WhatsApp would refuse the text
// (conversations.TextSession, the Cloud API's limits).
func textProblem(err error) string {
	var te *conversations.TextError
	if !errors.As(err, &te) || len(te.Problems) == 0 {
		return "This reply cannot be sent."
	}
	switch p := te.Problems[0]; {
	case te.TooLong():
		return "A WhatsApp message has at most 4,096 characters; yours has " + thousands(te.Length) + ". Shorten it and send it again."
	case p.Type == "string_too_short" || p.Type == "value_error":
		return "Write your reply before sending it."
	default:
		return "This reply cannot be sent: " + p.Msg
	}
}

// thousands writes n with a comma between thousands: 4,097.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
