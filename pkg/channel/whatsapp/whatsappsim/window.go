package whatsappsim

import (
	"strings"
	"sync"
	"time"
)

// The customer service window, as Meta's "Customer service windows" page
// (WhatsApp Cloud API, Conversations / Pricing) describes it: when a user
// messages a business number, a 24-hour window opens (or is refreshed) in
// which the business may send any message; outside it only templates are
// delivered, and a free-form message fails with 131047 "Re-engagement
// message". The window is per business number and user, and runs from the
// user's last message (its timestamp), not from when the business read it.

// Service window error modes (Rules.ServiceWindowError).
const (
	// WindowErrorStatus answers the send 200 with a wamid and posts a
	// failed status carrying 131047, as the Cloud API does.
	WindowErrorStatus = "status"
	// WindowErrorSync answers the send itself 400 with 131047.
	WindowErrorSync = "sync"
)

// DefaultServiceWindow is Meta's customer service window.
const DefaultServiceWindow = 24 * time.Hour

// codeReengagement is the Cloud API's error for a session message outside
// the window.
const codeReengagement = 131047

const reengagementDetails = "Message failed to send because more than 24 hours have passed since the customer last replied to this number."

var errReengagement = &apiError{status: 400, code: codeReengagement, typ: "OAuthException",
	message: "(#131047) Re-engagement message", details: reengagementDetails}

// windows remembers, per (phone number id, user), when the user's last
// message was sent. It holds at most capacity pairs: when full it first
// forgets the closed windows; a user it still cannot hold is not
// remembered (counted), so that sends to them get 131047 as for a user who
// never wrote.
type windows struct {
	mu        sync.Mutex
	last      map[string]int64 // unix nanoseconds
	capacity  int
	untracked int64
}

func newWindows(capacity int) *windows {
	return &windows{last: map[string]int64{}, capacity: capacity}
}

func windowKey(pnid, digits string) string { return pnid + ":" + digits }

// touch records a user's message sent at at; an older message than the
// one recorded does not shorten the window.
func (w *windows) touch(pnid, digits string, at, now time.Time, length time.Duration) {
	key := windowKey(pnid, digits)
	t := at.UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, ok := w.last[key]
	if ok {
		w.last[key] = max(prev, t)
		return
	}
	if len(w.last) >= w.capacity {
		cutoff := now.Add(-length).UnixNano()
		for k, v := range w.last {
			if v <= cutoff {
				delete(w.last, k)
			}
		}
		if len(w.last) >= w.capacity {
			w.untracked++
			return
		}
	}
	w.last[key] = t
}

// lastMessage is when the user last wrote to the number.
func (w *windows) lastMessage(pnid, digits string) (time.Time, bool) {
	w.mu.Lock()
	t, ok := w.last[windowKey(pnid, digits)]
	w.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, t).UTC(), true
}

// open reports whether the window is open at now.
func (w *windows) open(pnid, digits string, now time.Time, length time.Duration) bool {
	last, ok := w.lastMessage(pnid, digits)
	return ok && now.Before(last.Add(length))
}

func (w *windows) stats() (tracked int, untracked int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last), w.untracked
}

func (w *windows) reset() {
	w.mu.Lock()
	w.last = map[string]int64{}
	w.untracked = 0
	w.mu.Unlock()
}

// Window is the customer service window of one user on one number.
type Window struct {
	PhoneNumberID string `json:"phone_number_id"`
	// User is the user's number in digits.
	User string `json:"user"`
	// Open says whether a session message would be delivered now.
	Open bool `json:"open"`
	// LastMessage is when the user last wrote (the timestamp the simulator
	// played); ExpiresAt is LastMessage plus the rules' window. Both are
	// absent when the user never wrote.
	LastMessage *time.Time `json:"last_message,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// Window returns the window of user (digits, a leading '+' is ignored) on
// a number, under the rules in force.
func (s *Sim) Window(phoneNumberID, user string) Window {
	digits := strings.TrimPrefix(user, "+")
	w := Window{PhoneNumberID: phoneNumberID, User: digits}
	last, ok := s.windows.lastMessage(phoneNumberID, digits)
	if !ok {
		return w
	}
	exp := last.Add(s.Rules().ServiceWindow)
	w.LastMessage, w.ExpiresAt = &last, &exp
	w.Open = time.Now().Before(exp)
	return w
}
