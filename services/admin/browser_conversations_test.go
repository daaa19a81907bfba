package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// TestBrowserConversations drives the Conversations pages in headless
// Chromium as a member (replying is theirs too): the empty list; a contact
// who asked "Is my order shipped?" listed with the window's countdown; its
// thread with a campaign message before; a reply typed and sent, shown
// from the stream until the dispatcher's first step records it, then
// queued; a closed window's thread with its notice and no reply box, whose
// forged reply is refused with the sentence; and a reply refused because
// the window closed while the page was open. Each step is photographed into
// artifacts/screenshots as conversations-NN-*.png.
func TestBrowserConversations(t *testing.T) {
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	now := time.Date(2025, 6, 2, 9, 30, 0, 0, time.UTC)
	e.Clock.Set(now)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctx, exe, "conversations")
	tab, do, submit, count, shot := b.tab, b.do, b.submit, b.count, b.shot
	text := func(sel chromedp.CSS) string {
		t.Helper()
		return strings.Join(strings.Fields(b.text(sel)), " ")
	}

	b.signIn(e.URL+"/login", "max@acme.example")
	do("open Conversations from the sidebar", chromedp.Click(chromedp.ID("nav-conversations")), chromedp.WaitVisible(chromedp.ID("no-conversations")))
	shot("empty")

	f := e.conversations()
	f.campaignMessage("+14155550101", "read", 0, "", now.Add(-26*time.Hour))
	f.receive("+14155550102", "Bob Martin", f.sales, inboundText("Do you ship to Canada?"), now.Add(-30*time.Hour))
	f.campaignMessage("+14155550102", "failed", 131026, "Message undeliverable", now.Add(-29*time.Hour))
	f.receive("+14155550103", "", f.support, whatsapp.InboundContent{Type: "image",
		Image: &whatsapp.InboundMedia{ID: "m1", MimeType: "image/jpeg", Caption: "The lid arrived broken"}}, now.Add(-3*time.Hour))
	f.receive("+14155550101", "Jane Doe", f.support, inboundText("Is my order shipped?"), now.Add(-48*time.Minute))

	// The list: the contact who wrote last first, names, countdowns.
	do("reload the list", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("conversations")))
	if n := count(`#conversations tr.conversation`); n != 3 {
		t.Fatalf("the list shows %d conversations, want 3", n)
	}
	row := func(phone string) string { return fmt.Sprintf(`#conversations tr[data-phone=%q]`, phone) }
	if got := text(chromedp.CSS(`#conversations tbody tr:first-child .name`)); got != "Jane Doe" {
		t.Fatalf("first in the list: %q", got)
	}
	if got := text(chromedp.CSS(row("+14155550101") + ` .window`)); got != "Open · 23 h 12 m left" {
		t.Errorf("Jane's window: %q", got)
	}
	if got := text(chromedp.CSS(row("+14155550102") + ` .window`)); got != "Closed since 2 Jun 2025, 03:30 UTC" {
		t.Errorf("Bob's window: %q", got)
	}
	if got := text(chromedp.CSS(row("+14155550103") + ` .summary`)); got != "[image] The lid arrived broken" {
		t.Errorf("the image's summary: %q", got)
	}
	shot("list")

	// The thread: both directions, the window's countdown.
	do("open Jane's conversation", chromedp.Click(chromedp.CSS(row("+14155550101")+` a.conversation-link`)), chromedp.WaitVisible(chromedp.ID("thread")))
	if got := text(`#windows .countdown`); got != "Replies allowed for another 23 h 12 m" {
		t.Errorf("countdown %q", got)
	}
	msgs := func() []string {
		t.Helper()
		out, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#thread li.msg")].map(li =>
			li.dataset.direction + " " + (li.dataset.state || "-") + " " + li.querySelector(".msg-text").textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{`outbound read template "order_update" (en_US)`, "inbound - Is my order shipped?"}
	if got := msgs(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("thread %q, want %q", got, want)
	}
	if got := text(`#thread li.msg-out .msg-who`); got != `→ Campaign "Spring sale"` {
		t.Errorf("the campaign message says %q", got)
	}
	shot("thread")

	// A reply: typed, sent, shown from the stream, then as the dispatcher records it.
	do("type a reply", chromedp.SendKeys(chromedp.ID("reply-text"), "Yes, it left our warehouse this morning."))
	submit("send the reply", `#send-reply`, http.StatusOK)
	do("the thread after the reply", chromedp.WaitVisible(chromedp.CSS(`#thread li.msg-pending`)))
	if got := text(`.alert-ok`); !strings.HasPrefix(got, "Reply accepted") {
		t.Fatalf("notice %q", got)
	}
	want = append(want, "outbound accepted Yes, it left our warehouse this morning.")
	if got := msgs(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("thread after the reply %q, want %q", got, want)
	}
	// The page scrolled to the reply (#latest): photograph it from the top.
	if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(window.scrollTo(0, 0), true)`)); err != nil {
		t.Fatal(err)
	}
	shot("reply-accepted")
	replies := f.takeReplies()
	if len(replies) != 1 || replies[0].GetPhone() != "+14155550101" || replies[0].GetMessagingAccountId() != f.support.ID {
		t.Fatalf("replies in the stream: %v", replies)
	}
	do("reload once recorded", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("thread")))
	want[2] = "outbound queued Yes, it left our warehouse this morning."
	if got := msgs(); strings.Join(got, "|") != strings.Join(want, "|") || count(`#thread li.msg-pending`) != 0 {
		t.Fatalf("thread once recorded %q, want %q", got, want)
	}
	if got := text(chromedp.CSS(fmt.Sprintf(`#thread li[data-id="%d"] .msg-who`, replies[0].GetMessageId()))); got != "→ Reply" {
		t.Errorf("the reply says %q", got)
	}
	shot("reply-queued")

	// A closed window: the notice, no reply box; a forged reply refused.
	do("open Bob's conversation", chromedp.Navigate(e.URL+"/conversations/+14155550102"), chromedp.WaitVisible(chromedp.ID("thread")))
	if got := text(`#windows .closed-notice`); got != "Window closed at 2 Jun 2025, 03:30 UTC: only templates" {
		t.Errorf("closed notice %q", got)
	}
	if count(`#reply-form`) != 0 || count(`#reply-closed`) != 1 {
		t.Error("a closed window's thread offers the reply box")
	}
	if got := text(`#thread li[data-state="failed"] .msg-error`); got != "131026 Message undeliverable" {
		t.Errorf("the failed message's error: %q", got)
	}
	shot("closed-window")
	type answer struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	forged, err := chromedp.Run(tab, chromedp.Evaluate[answer](`fetch("/conversations/+14155550102/reply", {method: "POST",
		body: new URLSearchParams({text: "Yes we do"})}).then(async r => ({status: r.status, body: await r.text()}))`, chromedp.EvalAwaitPromise))
	if err != nil || forged.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(html.UnescapeString(forged.Body), `The 24-hour customer service window with +14155550102 on "Acme Sales" ended at 2025-06-02T03:30:00Z`) {
		t.Fatalf("a reply to the closed window: %d %v\n%s", forged.Status, err, forged.Body)
	}

	// The window closes while the reply is typed: refused with the sentence.
	do("open Jane's conversation again", chromedp.Navigate(e.URL+"/conversations/+14155550101"), chromedp.WaitVisible(chromedp.ID("reply-text")))
	do("type a late reply", chromedp.SendKeys(chromedp.ID("reply-text"), "Anything else?"))
	e.Clock.Advance(24 * time.Hour)
	submit("send the late reply", `#send-reply`, http.StatusUnprocessableEntity)
	do("the refusal", chromedp.WaitVisible(chromedp.ID("reply-error")))
	if got := text(`#reply-error`); !strings.HasPrefix(got, `The 24-hour customer service window with +14155550101 on "Acme Support" ended at 2025-06-03T08:42:00Z`) ||
		!strings.HasSuffix(got, "only a template message can be sent until the contact writes again") {
		t.Fatalf("refusal %q", got)
	}
	if count(`#reply-form`) != 0 || text(`#windows .closed-notice`) != "Window closed at 3 Jun 2025, 08:42 UTC: only templates" {
		t.Error("the refused reply's page does not show the window closed")
	}
	shot("window-closed-on-send")
	if n := f.waitingReplies(); n != 0 {
		t.Fatalf("%d refused replies reached the stream", n)
	}
}
