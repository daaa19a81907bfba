package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/admin/internal/batches"
)

// fixtureMsg is a message of a fixture batch: its state, and when it
// reached it after the batch was accepted (every message is created 1s
// after the batch). Earlier states of its lifecycle get times before at.
type fixtureMsg struct {
	State string
	At    time.Duration
	Code  int
	Title string
}

// seedBatch writes a batch of company and its messages straight into the
// database, as the gateway and the dispatchers would have left them.
func (e *env) seedBatch(companyID int64, kind, source, status string, accepted time.Time, contacts int, msgs []fixtureMsg) string {
	e.t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	var completed *time.Time
	if status == "completed" || status == "cancelled" {
		last := accepted
		for _, m := range msgs {
			if t := accepted.Add(m.At); t.After(last) {
				last = t
			}
		}
		completed = &last
	}
	if contacts < len(msgs) {
		contacts = len(msgs)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at, completed_at)
		VALUES ($1, $2, $3::batch_kind, $4, $5, $6::batch_status, $7, $8)`,
		id, companyID, kind, source, contacts, status, accepted, completed); err != nil {
		e.t.Fatalf("seed batch: %v", err)
	}
	for i, m := range msgs {
		at := accepted.Add(m.At)
		created := accepted.Add(time.Second)
		var sent, delivered, read, failed, skipped, cancelled *time.Time
		before := func(d time.Duration) *time.Time { t := at.Add(-d); return &t }
		switch m.State {
		case "sent":
			sent = &at
		case "delivered":
			sent, delivered = before(2*time.Second), &at
		case "read":
			sent, delivered, read = before(4*time.Second), before(2*time.Second), &at
		case "failed":
			failed = &at
		case "skipped_opt_out":
			skipped = &at
		case "cancelled":
			cancelled = &at
		}
		updated := created
		if m.At > time.Second {
			updated = at
		}
		var code *int
		var title *string
		if m.Code != 0 {
			code, title = &m.Code, &m.Title
		}
		phone := fmt.Sprintf("+3361234%04d", i)
		if _, err := e.Pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, state, error_code, error_title,
				attempts, created_at, updated_at, sent_at, delivered_at, read_at, failed_at, skipped_at, cancelled_at)
			VALUES ($1, $2, $3, $4, $5::text::message_state, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			id, i, companyID, phone, m.State, code, title, map[bool]int{true: 1}[sent != nil || failed != nil],
			created, updated, sent, delivered, read, failed, skipped, cancelled); err != nil {
			e.t.Fatalf("seed message %d: %v", i, err)
		}
	}
	return id
}

// repeatMsg is n messages in the same state at the same time.
func repeatMsg(n int, m fixtureMsg) []fixtureMsg {
	out := make([]fixtureMsg, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func concat(parts ...[]fixtureMsg) []fixtureMsg {
	var out []fixtureMsg
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// sendsFixture is a completed campaign, an automation under way, a
// campaign not expanded yet, and another company's batch.
type sendsFixture struct {
	Completed, UnderWay, NotExpanded, Foreign string
}

func (e *env) seedSends() sendsFixture {
	e.t.Helper()
	var other int64
	if err := e.Pool.QueryRow(context.Background(), `INSERT INTO companies (slug, name, subscription_active, provisioned)
		VALUES ('globex', 'Globex', true, true) RETURNING id`).Scan(&other); err != nil {
		e.t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	var f sendsFixture
	f.Foreign = e.seedBatch(other, "campaign", "/api/campaigns/send", "completed", t0, 0,
		repeatMsg(4, fixtureMsg{State: "delivered", At: 30 * time.Second}))
	f.Completed = e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", t0.Add(time.Minute), 0, concat(
		repeatMsg(3, fixtureMsg{State: "delivered", At: 20 * time.Second}),
		repeatMsg(1, fixtureMsg{State: "read", At: 40 * time.Second}),
		repeatMsg(2, fixtureMsg{State: "failed", At: 10 * time.Second, Code: 131026, Title: "Message undeliverable"}),
		repeatMsg(1, fixtureMsg{State: "skipped_opt_out", At: 5 * time.Second}),
	))
	f.UnderWay = e.seedBatch(e.CompanyID, "automation", "/api/automations/trigger", "processing", t0.Add(2*time.Minute), 0, concat(
		repeatMsg(2, fixtureMsg{State: "sent", At: 10 * time.Second}),
		repeatMsg(5, fixtureMsg{State: "queued", At: time.Second}),
	))
	f.NotExpanded = e.seedBatch(e.CompanyID, "connector", "connector:shopify", "accepted", t0.Add(3*time.Minute), 100, nil)
	return f
}

var batchRowRe = regexp.MustCompile(`data-batch-id="([0-9a-f-]{36})"`)

// stateCounts reads the counts a batch page shows, by state.
func stateCounts(body string) map[string]string {
	re := regexp.MustCompile(`<li data-state="([a-z_]+)">.*?<strong class="count">(\d+)</strong></li>`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestConsoleSendsPages(t *testing.T) {
	e := newEnv(t, nil)
	f := e.seedSends()
	admin, member := e.browser(), e.browser()
	admin.mustSignIn("ada@acme.example")
	member.mustSignIn("max@acme.example")

	if p := e.browser().get("/sends"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
		t.Fatalf("signed out: %d to %q", p.Status, p.Header.Get("Location"))
	}

	t.Run("list", func(t *testing.T) {
		p := admin.get("/sends")
		if p.Status != http.StatusOK {
			t.Fatalf("status %d", p.Status)
		}
		var ids []string
		for _, m := range batchRowRe.FindAllStringSubmatch(p.Body, -1) {
			ids = append(ids, m[1])
		}
		want := []string{f.NotExpanded, f.UnderWay, f.Completed}
		if strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Fatalf("listed %v, want the company's batches newest first %v", ids, want)
		}
		for _, s := range []string{"Campaign", "Automation", "Connector", "connector:shopify", "/api/automations/trigger",
			`class="pill status pill-ok">Completed`, `class="pill status pill-warn">Sending`, `class="pill status pill-warn">Accepted`,
			"Read 1, Delivered 3, Failed 2, Skipped (opted out) 1", "Sent 2, Queued 5", "100 messages", "7 messages"} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the Sends page lacks %q", s)
			}
		}
		// Cancel is offered for what can still be cancelled, and to admins only.
		for id, want := range map[string]bool{f.Completed: false, f.UnderWay: true, f.NotExpanded: true} {
			if got := strings.Contains(p.Body, `href="/sends/`+id+`/cancel"`); got != want {
				t.Errorf("admin: cancel offered for %s = %v, want %v", id, got, want)
			}
		}
		mp := member.get("/sends")
		if mp.Status != http.StatusOK || len(batchRowRe.FindAllString(mp.Body, -1)) != 3 {
			t.Fatalf("member: status %d", mp.Status)
		}
		if strings.Contains(mp.Body, "/cancel") || !strings.Contains(mp.Body, "Only admins of Acme Retail can cancel a send.") {
			t.Error("a member's Sends page offers cancel, or lacks the read-only notice")
		}
	})

	t.Run("batch page", func(t *testing.T) {
		p := member.get("/sends/" + f.Completed)
		if p.Status != http.StatusOK {
			t.Fatalf("status %d", p.Status)
		}
		got := stateCounts(p.Body)
		want := map[string]string{"delivered": "3", "read": "1", "failed": "2", "skipped_opt_out": "1"}
		if len(got) != len(want) {
			t.Fatalf("counts %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("count of %s: %q, want %q", k, got[k], v)
			}
		}
		if n := strings.Count(p.Body, `<tr class="problem" data-state="failed">`); n != 2 {
			t.Errorf("%d failed messages listed, want 2", n)
		}
		if n := strings.Count(p.Body, `<tr class="problem" data-state="skipped_opt_out">`); n != 1 {
			t.Errorf("%d skipped messages listed, want 1", n)
		}
		for _, s := range []string{"<code>131026</code> Message undeliverable", "The contact opted out of campaigns",
			`<svg class="timeline"`, `class="area area-delivered"`, `class="area area-read"`, `class="area area-failed"`,
			"at the end: Delivered 3, Read 1, Failed 2, Skipped (opted out) 1"} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the batch page lacks %q", s)
			}
		}
		if strings.Contains(p.Body, "cancel-batch") {
			t.Error("a completed batch offers cancel")
		}
		if strings.Contains(p.Body, "<script") && strings.Count(p.Body, "<script") != 1 {
			t.Error("the batch page loads a script besides the console's own")
		}

		u := admin.get("/sends/" + f.UnderWay)
		if u.Status != http.StatusOK || !strings.Contains(u.Body, `id="cancel-batch"`) || !strings.Contains(u.Body, "No message of this send failed") {
			t.Errorf("a batch under way, admin: status %d, or no cancel", u.Status)
		}
		if c := stateCounts(u.Body); c["sent"] != "2" || c["queued"] != "5" {
			t.Errorf("a batch under way: counts %v", c)
		}
		if m := member.get("/sends/" + f.UnderWay); strings.Contains(m.Body, "cancel-batch") {
			t.Error("a member's batch page offers cancel")
		}
		n := admin.get("/sends/" + f.NotExpanded)
		if n.Status != http.StatusOK || !strings.Contains(n.Body, `id="not-expanded"`) || !strings.Contains(n.Body, "No messages yet") {
			t.Errorf("a batch not expanded: status %d", n.Status)
		}
	})

	t.Run("another company's or unknown batch is 404", func(t *testing.T) {
		for _, id := range []string{f.Foreign, uuid.Must(uuid.NewV7()).String(), "not-a-uuid", "1"} {
			if p := admin.get("/sends/" + id); p.Status != http.StatusNotFound || strings.Contains(p.Body, "+336") {
				t.Errorf("%s: status %d, want 404", id, p.Status)
			}
		}
		if p := admin.get("/sends?before=nope"); p.Status != http.StatusBadRequest {
			t.Errorf("bad cursor: status %d, want 400", p.Status)
		}
	})
}

// The chart's counts are each message's latest state time at or before
// each moment.
func TestSendsTimeline(t *testing.T) {
	e := newEnv(t, nil)
	t0 := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	id := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", t0, 0, []fixtureMsg{
		{State: "read", At: 34 * time.Second},   // sent 30s, delivered 32s, read 34s
		{State: "failed", At: 15 * time.Second}, // waiting, then failed
		{State: "sent", At: 40 * time.Second},   // the last change
	})
	st := batches.New(e.Pool, time.Now)
	ctx := context.Background()
	b, err := st.Get(ctx, e.CompanyID, id)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := st.Timeline(ctx, b, 5)
	if err != nil {
		t.Fatal(err)
	}
	// It ended at its last change (40s), held for one more step.
	if !tl.Start.Equal(t0) || !tl.End.Equal(t0.Add(50*time.Second)) || len(tl.Counts) != 6 {
		t.Fatalf("timeline from %v to %v with %d points", tl.Start, tl.End, len(tl.Counts))
	}
	want := []map[string]int{
		{},                                     // 0s: nothing created yet
		{"waiting": 3},                         // 10s
		{"waiting": 2, "failed": 1},            // 20s
		{"sent": 1, "failed": 1, "waiting": 1}, // 30s: sent at 30s counts, delivered at 32s not yet
		{"read": 1, "failed": 1, "sent": 1},    // 40s
		{"read": 1, "failed": 1, "sent": 1},    // 50s: the final state, drawn over a step
	}
	// The timeline ends on the batch's counts, whatever order the
	// provider's callbacks came in: a failure a later delivery overrode is
	// not shown, a failure recorded before its sent time still ends failed.
	odd := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", t0, 0, []fixtureMsg{
		{State: "delivered", At: 20 * time.Second},
		{State: "failed", At: 10 * time.Second, Code: 131026, Title: "Message undeliverable"},
	})
	if _, err := e.Pool.Exec(ctx, `UPDATE messages SET failed_at = $2 WHERE batch_id = $1 AND seq = 0`, odd, t0.Add(15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE messages SET sent_at = $2 WHERE batch_id = $1 AND seq = 1`, odd, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	ob, err := st.Get(ctx, e.CompanyID, odd)
	if err != nil {
		t.Fatal(err)
	}
	ot, err := st.Timeline(ctx, ob, 6)
	if err != nil {
		t.Fatal(err)
	}
	if end := ot.Counts[6]; len(end) != 2 || end["delivered"] != 1 || end["failed"] != 1 {
		t.Errorf("out-of-order callbacks: the timeline ends on %v, want delivered 1, failed 1", end)
	}
	for i, c := range ot.Counts {
		if n := c["failed"]; n > 1 || (n == 1 && ot.At[i].Before(t0.Add(10*time.Second))) {
			t.Errorf("point %d (%v): %v", i, ot.At[i].Sub(t0), c)
		}
	}

	// A batch done within a second still has a timeline.
	quick := e.seedBatch(e.CompanyID, "automation", "/api/automations/trigger", "completed", t0, 0,
		[]fixtureMsg{{State: "sent", At: time.Second}})
	if _, err := e.Pool.Exec(ctx, `UPDATE messages SET created_at = $2, sent_at = $3 WHERE batch_id = $1`,
		quick, t0.Add(time.Microsecond), t0.Add(2*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	qb, err := st.Get(ctx, e.CompanyID, quick)
	if err != nil {
		t.Fatal(err)
	}
	qt, err := st.Timeline(ctx, qb, 60)
	if err != nil || qt.End.Sub(qt.Start) < time.Second || qt.Counts[60]["sent"] != 1 {
		t.Fatalf("a quick batch: %v, from %v to %v, at the end %v", err, qt.Start, qt.End, qt.Counts[60])
	}
	for i, w := range want {
		g := tl.Counts[i]
		if len(g) != len(w) {
			t.Errorf("point %d (%v): %v, want %v", i, tl.At[i].Sub(t0), g, w)
			continue
		}
		for k, v := range w {
			if g[k] != v {
				t.Errorf("point %d (%v): %v, want %v", i, tl.At[i].Sub(t0), g, w)
				break
			}
		}
	}
}

// The chart runs to the batch's end, or to now while it is under way, so
// that the state it is in now is drawn at its true width.
func TestSendsTimelineRunsToTheBatchEnd(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	t0 := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	st := batches.New(e.Pool, func() time.Time { return now })
	timeline := func(id string, points int) batches.Timeline {
		t.Helper()
		b, err := st.Get(ctx, e.CompanyID, id)
		if err != nil {
			t.Fatal(err)
		}
		tl, err := st.Timeline(ctx, b, points)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	setBatch := func(id, column string, at time.Time) {
		t.Helper()
		if _, err := e.Pool.Exec(ctx, `UPDATE batches SET `+column+` = $2 WHERE id = $1`, id, at); err != nil {
			t.Fatal(err)
		}
	}

	// Read in full: every message was sent at 26s (the batch completed
	// then), delivered at 28s and read at 30s. The chart holds the reads for a step past
	// the last one: its last two moments are all read, not a ramp from
	// delivered at the very end.
	read := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", t0, 0,
		repeatMsg(4, fixtureMsg{State: "read", At: 30 * time.Second}))
	setBatch(read, "completed_at", t0.Add(26*time.Second)) // sent at 26s: nothing left to send
	tl := timeline(read, 6)
	if !tl.End.Equal(t0.Add(36 * time.Second)) {
		t.Fatalf("read in full: the chart ends at %v, want 36s (30s and a step)", tl.End.Sub(t0))
	}
	for _, i := range []int{5, 6} {
		if c := tl.Counts[i]; len(c) != 1 || c["read"] != 4 {
			t.Errorf("read in full, point %d (%v): %v, want read 4", i, tl.At[i].Sub(t0), c)
		}
	}
	if c := tl.Counts[4]; len(c) != 1 || c["waiting"] != 4 {
		t.Errorf("read in full, point 4 (%v): %v, want waiting 4 (sent at 26s)", tl.At[4].Sub(t0), c)
	}

	// Completed after its last change: the chart runs to completed_at.
	done := e.seedBatch(e.CompanyID, "automation", "/api/automations/trigger", "completed", t0, 0,
		repeatMsg(2, fixtureMsg{State: "failed", At: 20 * time.Second, Code: 131026, Title: "Message undeliverable"}))
	setBatch(done, "completed_at", t0.Add(80*time.Second))
	if tl := timeline(done, 4); !tl.End.Equal(t0.Add(80*time.Second)) || tl.Counts[3]["failed"] != 2 {
		t.Errorf("completed at 80s: the chart ends at %v with %v before the end", tl.End.Sub(t0), tl.Counts[3])
	}

	// Cancelled at 2 minutes, its messages before: the chart runs to the cancel.
	cancelled := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "cancelled", t0, 0,
		repeatMsg(3, fixtureMsg{State: "cancelled", At: 30 * time.Second}))
	setBatch(cancelled, "cancelled_at", t0.Add(2*time.Minute))
	if tl := timeline(cancelled, 4); !tl.End.Equal(t0.Add(2*time.Minute)) || tl.Counts[3]["cancelled"] != 3 {
		t.Errorf("cancelled at 2m: the chart ends at %v with %v before the end", tl.End.Sub(t0), tl.Counts[3])
	}

	// Under way: to now, whatever its last change.
	underWay := e.seedBatch(e.CompanyID, "batch", "/api/batches", "processing", t0, 0, concat(
		repeatMsg(1, fixtureMsg{State: "sent", At: 30 * time.Second}),
		repeatMsg(1, fixtureMsg{State: "queued", At: time.Second})))
	if tl := timeline(underWay, 10); !tl.End.Equal(now) || tl.Counts[9]["sent"] != 1 || tl.Counts[9]["waiting"] != 1 {
		t.Errorf("under way: the chart ends at %v with %v before the end", tl.End.Sub(t0), tl.Counts[9])
	}
	// A finished batch's chart never runs past now.
	now = t0.Add(31 * time.Second)
	if tl := timeline(read, 6); !tl.End.Equal(now) {
		t.Errorf("read in full, read a second after its last change: the chart ends at %v, want now (31s)", tl.End.Sub(t0))
	}
}

// messageStates counts a batch's messages by state in the database.
func (e *env) messageStates(batchID string) map[string]int {
	e.t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT state::text, count(*) FROM messages WHERE batch_id = $1 GROUP BY state`, batchID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			e.t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) batchStatus(batchID string) string {
	e.t.Helper()
	var s string
	if err := e.Pool.QueryRow(context.Background(), `SELECT status::text FROM batches WHERE id = $1`, batchID).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestConsoleCancel(t *testing.T) {
	e := newEnv(t, nil)
	f := e.seedSends()
	allQueued := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "processing", time.Now().UTC().Add(-time.Minute), 0,
		repeatMsg(3, fixtureMsg{State: "queued", At: time.Second}))
	admin, member := e.browser(), e.browser()
	admin.mustSignIn("ada@acme.example")
	member.mustSignIn("max@acme.example")
	cancelPath := "/sends/" + f.UnderWay + "/cancel"
	before := e.messageStates(f.UnderWay)
	if !sameCounts(before, map[string]int{"sent": 2, "queued": 5}) {
		t.Fatalf("fixture: %v", before)
	}
	unchanged := func(what string) {
		t.Helper()
		if got := e.messageStates(f.UnderWay); !sameCounts(got, before) || e.batchStatus(f.UnderWay) != "processing" {
			t.Fatalf("%s changed the batch: %v, %s", what, got, e.batchStatus(f.UnderWay))
		}
	}

	t.Run("a member cannot cancel", func(t *testing.T) {
		if p := member.get(cancelPath); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "Cancelling a send is reserved for your company") {
			t.Errorf("member, confirmation page: status %d", p.Status)
		}
		p := member.post(cancelPath, url.Values{"confirm": {"yes"}})
		if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "Only admins can do this") {
			t.Errorf("member, cancel: status %d, want 403", p.Status)
		}
		unchanged("a member's cancel")
	})

	t.Run("cross-site and unconfirmed posts change nothing", func(t *testing.T) {
		if p := admin.post(cancelPath, url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site"); p.Status != http.StatusForbidden {
			t.Errorf("cross-site cancel: status %d, want 403", p.Status)
		}
		if p := admin.post(cancelPath, nil); p.Status != http.StatusSeeOther || p.Header.Get("Location") != cancelPath {
			t.Errorf("unconfirmed cancel: %d to %q, want 303 to the confirmation", p.Status, p.Header.Get("Location"))
		}
		unchanged("an unconfirmed or cross-site cancel")
	})

	t.Run("another company's or unknown batch is 404", func(t *testing.T) {
		for _, id := range []string{f.Foreign, uuid.Must(uuid.NewV7()).String(), "nope"} {
			if p := admin.post("/sends/"+id+"/cancel", url.Values{"confirm": {"yes"}}); p.Status != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", id, p.Status)
			}
		}
		if got := e.messageStates(f.Foreign); !sameCounts(got, map[string]int{"delivered": 4}) {
			t.Errorf("the other company's batch: %v", got)
		}
	})

	t.Run("an admin cancels", func(t *testing.T) {
		p := admin.get(cancelPath)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "5 messages not yet handed to WhatsApp will not be sent.") {
			t.Fatalf("confirmation page: status %d\n%s", p.Status, p.Body)
		}
		p = admin.post(cancelPath, url.Values{"confirm": {"yes"}})
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/sends/"+f.UnderWay {
			t.Fatalf("cancel: %d to %q", p.Status, p.Header.Get("Location"))
		}
		if got := e.messageStates(f.UnderWay); !sameCounts(got, map[string]int{"sent": 2, "cancelled": 5}) {
			t.Fatalf("after cancel: %v", got)
		}
		page := admin.get("/sends/" + f.UnderWay)
		if !strings.Contains(page.Body, "Send cancelled: 5 messages will not be sent.") {
			t.Error("no notice of what was cancelled")
		}
		if c := stateCounts(page.Body); c["cancelled"] != "5" || c["sent"] != "2" || len(c) != 2 {
			t.Errorf("batch page counts after cancel: %v", c)
		}
		if strings.Contains(page.Body, `id="cancel-batch"`) || !strings.Contains(page.Body, `id="cancelled-at"`) {
			t.Error("a cancelled batch still offers cancel, or does not say when it was cancelled")
		}
		// Some were sent: completed, with a cancelled count.
		if s := e.batchStatus(f.UnderWay); s != "completed" {
			t.Errorf("status %q, want completed", s)
		}
		list := admin.get("/sends")
		if strings.Contains(list.Body, `href="/sends/`+f.UnderWay+`/cancel"`) || !strings.Contains(list.Body, "5 cancelled · 7 messages") {
			t.Error("the Sends page still offers cancel, or does not count the cancelled messages")
		}

		// Again: nothing left to cancel.
		p = admin.post(cancelPath, url.Values{"confirm": {"yes"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("second cancel: status %d", p.Status)
		}
		if page := admin.get("/sends/" + f.UnderWay); !strings.Contains(page.Body, "Nothing was cancelled") {
			t.Error("a second cancel does not say that nothing was cancelled")
		}
		if p := admin.get(cancelPath); p.Status != http.StatusSeeOther {
			t.Errorf("confirmation page of a finished batch: status %d, want 303 back", p.Status)
		}
	})

	t.Run("a batch none of whose messages was sent ends cancelled", func(t *testing.T) {
		if p := admin.post("/sends/"+allQueued+"/cancel", url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("cancel: status %d", p.Status)
		}
		if s := e.batchStatus(allQueued); s != "cancelled" {
			t.Fatalf("status %q, want cancelled", s)
		}
		list := admin.get("/sends")
		if !strings.Contains(list.Body, `class="pill status pill-off">Cancelled`) {
			t.Error("the Sends page does not show the cancelled status")
		}
		page := member.get("/sends/" + allQueued)
		if !strings.Contains(page.Body, `id="batch-status">Cancelled`) || !strings.Contains(page.Body, `class="area area-cancelled"`) {
			t.Error("the batch page does not show the batch cancelled, or its chart has no cancelled area")
		}
	})
}

// The failed and skipped messages are listed a page at a time, with the
// cursor of record.Messages.
func TestConsoleBatchProblemsPages(t *testing.T) {
	e := newEnv(t, nil)
	id := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", time.Now().UTC().Add(-time.Hour), 0, concat(
		repeatMsg(30, fixtureMsg{State: "failed", At: 10 * time.Second, Code: 131026, Title: "Message undeliverable"}),
		repeatMsg(10, fixtureMsg{State: "delivered", At: 10 * time.Second}),
		repeatMsg(30, fixtureMsg{State: "skipped_opt_out", At: 5 * time.Second}),
	))
	b := e.browser()
	b.mustSignIn("max@acme.example")
	p := b.get("/sends/" + id)
	rows := strings.Count(p.Body, `<tr class="problem"`)
	m := regexp.MustCompile(`href="/sends/` + id + `\?cursor=([^"#]+)#problems" id="more-problems"`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || rows != 50 || m == nil {
		t.Fatalf("first page: status %d, %d rows, more link %v", p.Status, rows, m)
	}
	p2 := b.get("/sends/" + id + "?cursor=" + m[1])
	if p2.Status != http.StatusOK || strings.Count(p2.Body, `<tr class="problem" data-state="skipped_opt_out"`) != 10 ||
		strings.Count(p2.Body, `<tr class="problem"`) != 10 || strings.Contains(p2.Body, "more-problems") {
		t.Fatalf("second page: status %d, %d rows", p2.Status, strings.Count(p2.Body, `<tr class="problem"`))
	}
	if p := b.get("/sends/" + id + "?cursor=bogus"); p.Status != http.StatusBadRequest {
		t.Errorf("bad cursor: status %d, want 400", p.Status)
	}
}

// TestConsoleBatchSaysWhyMessagesAreHeld: a send whose messages wait for
// the messaging limit and for a paused template shows each reason in words,
// with the template's name and when the first may go.
func TestConsoleBatchSaysWhyMessagesAreHeld(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.browser()
	admin.mustSignIn("ada@acme.example")
	now := time.Now().UTC().Truncate(time.Second)
	id := e.seedBatch(e.CompanyID, "campaign", "api:campaigns_send", "processing", now.Add(-time.Minute), 0,
		concat(repeatMsg(3, fixtureMsg{State: "queued", At: time.Second}), repeatMsg(2, fixtureMsg{State: "sent", At: 2 * time.Second})))
	var tpl int64
	if err := e.Pool.QueryRow(context.Background(), `INSERT INTO templates (company_id, name, language, status)
		VALUES ($1, 'spring_sale', 'en_US', 'PAUSED') RETURNING id`, e.CompanyID).Scan(&tpl); err != nil {
		t.Fatal(err)
	}
	until := now.Add(3 * time.Hour)
	if _, err := e.Pool.Exec(context.Background(), `UPDATE messages SET state = 'held', held_at = now(),
			hold_reason = CASE WHEN seq = 0 THEN 'template_paused' ELSE 'messaging_limit' END,
			template_id = CASE WHEN seq = 0 THEN $2::bigint END, not_before = $3
		WHERE batch_id = $1 AND state = 'queued'`, id, tpl, until); err != nil {
		t.Fatal(err)
	}
	p := admin.get("/sends/" + id)
	if p.Status != http.StatusOK {
		t.Fatalf("status %d", p.Status)
	}
	for _, s := range []string{`id="held"`, "Messages held, not failed.", `data-reason="template_paused"`,
		"approve the template <code>spring_sale</code> again", `data-reason="messaging_limit"`,
		"room under your business portfolio", until.Format("2 Jan 2006, 15:04 UTC"), `data-state="held"`} {
		if !strings.Contains(p.Body, s) {
			t.Errorf("the send's page lacks %q", s)
		}
	}
	if !regexp.MustCompile(`data-reason="messaging_limit"><strong class="count">2</strong>`).MatchString(p.Body) {
		t.Error("the send's page does not count 2 messages held for the messaging limit")
	}
}
