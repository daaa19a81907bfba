package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/record"
)

// fixtureMessage is a message of a fixture batch.
type fixtureMessage struct {
	state string
	code  int
	title string
	wamid string
}

// seedBatch writes a batch and its messages straight into the database,
// as the gateway and the dispatchers would have left them.
func (s *stack) seedBatch(companyID int64, kind, source, status string, accepted time.Time, campaignID, automationID, segmentID *int64, msgs ...fixtureMessage) string {
	s.t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	var completed *time.Time
	if status == "completed" {
		c := accepted.Add(time.Minute)
		completed = &c
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at, completed_at,
			campaign_id, automation_id, segment_id)
		VALUES ($1, $2, $3::batch_kind, $4, $5, $6::batch_status, $7, $8, $9, $10, $11)`,
		id, companyID, kind, source, len(msgs), status, accepted, completed, campaignID, automationID, segmentID); err != nil {
		s.t.Fatalf("seed batch: %v", err)
	}
	for i, m := range msgs {
		var code *int
		var title, wamid *string
		if m.code != 0 {
			code, title = &m.code, &m.title
		}
		if m.wamid != "" {
			wamid = &m.wamid
		}
		attempts := 0
		var sent *time.Time
		switch m.state {
		case "sent", "delivered", "read":
			at := accepted.Add(2 * time.Second)
			sent, attempts = &at, 1
		case "failed":
			attempts = 1
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, state, error_code, error_title,
				provider_message_id, attempts, created_at, updated_at, sent_at)
			VALUES ($1, $2, $3, $4, $5::text::message_state, $6, $7, $8, $9, $10, $10, $11)`,
			id, i, companyID, fmt.Sprintf("+3361234%04d", i), m.state, code, title, wamid, attempts, accepted.Add(time.Second), sent); err != nil {
			s.t.Fatalf("seed message %d: %v", i, err)
		}
	}
	return id
}

// publishPending puts a campaign batch in the stream, as the gateway does
// before any dispatcher takes it.
func (s *stack) publishPending(companyID, campaignID, segmentID int64, size int, accepted time.Time) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := bus.Connect(s.busCfg, "cli-test-publish")
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, s.busCfg); err != nil {
		s.t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7()).String()
	raw, err := proto.Marshal(&sendsv1.CampaignBatch{BatchId: id, CompanyId: companyID, CampaignId: campaignID,
		SegmentId: segmentID, SegmentSize: int32(size), AcceptedAt: timestamppb.New(accepted), Source: "api:campaigns_send"})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := js.Publish(ctx, bus.ForBatch(s.busCfg.CampaignSubject(companyID), id), raw, jetstream.WithMsgID(id)); err != nil {
		s.t.Fatal(err)
	}
	return id
}

// batchesFixture is acme's campaign to a segment (completed), its
// automation's batch under way, a campaign batch still in the stream, and
// globex's batch.
type batchesFixture struct {
	acme, globex                          int64
	campaign, automation, segment         int64
	completed, underWay, pending, foreign string
	t0                                    time.Time
}

func (s *stack) seedBatches() batchesFixture {
	s.t.Helper()
	f := batchesFixture{acme: s.company("acme"), globex: s.company("globex"), t0: time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)}
	var tpl templateView
	s.jsonOK(&tpl, "templates", "create", "--company", "acme", "--name", "t1")
	var acct accountView
	s.jsonOK(&acct, "accounts", "create", "--company", "acme", "--phone-number-id", "111", "--access-token", "tok")
	var camp catalog.Campaign
	var auto catalog.Automation
	s.jsonOK(&camp, "campaigns", "create", "--company", "acme", "--name", "Spring sale", "--template", fmt.Sprint(tpl.ID), "--account", fmt.Sprint(acct.ID))
	s.jsonOK(&auto, "automations", "create", "--company", "acme", "--name", "Order shipped", "--active", "--template", fmt.Sprint(tpl.ID),
		"--account", fmt.Sprint(acct.ID))
	f.campaign, f.automation = camp.ID, auto.ID
	if err := s.pool.QueryRow(context.Background(), `INSERT INTO segments (company_id, name) VALUES ($1, 'VIP customers') RETURNING id`,
		f.acme).Scan(&f.segment); err != nil {
		s.t.Fatal(err)
	}
	f.foreign = s.seedBatch(f.globex, "batch", "api:batch_send", "completed", f.t0, nil, nil, nil, fixtureMessage{state: "delivered"})
	f.completed = s.seedBatch(f.acme, "campaign", "api:campaigns_send", "completed", f.t0.Add(time.Minute), &f.campaign, nil, &f.segment,
		fixtureMessage{state: "delivered", wamid: "wamid.HBgLMzM2MTIzNDAwMDAVAgARGBI"},
		fixtureMessage{state: "failed", code: 131026, title: "Message undeliverable", wamid: "wamid.HBgLMzM2MTIzNDAwMDEVAgARGBI"},
		fixtureMessage{state: "read", wamid: "wamid.HBgLMzM2MTIzNDAwMDIVAgARGBI"})
	f.underWay = s.seedBatch(f.acme, "automation", "api:automations_send", "processing", f.t0.Add(2*time.Minute), nil, &f.automation, nil,
		fixtureMessage{state: "sent", wamid: "wamid.HBgLMzM2MTIzNDAwMDMVAgARGBI"},
		fixtureMessage{state: "queued"}, fixtureMessage{state: "queued"})
	f.pending = s.publishPending(f.acme, f.campaign, f.segment, 40, f.t0.Add(3*time.Minute))
	return f
}

func TestBatchesList(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()

	r := s.ok("batches", "list", "--company", "acme")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "BATCH") {
		t.Fatalf("list:\n%s", r.stdout)
	}
	// Newest first, what each sends by name; the batch in the stream is not recorded yet.
	for i, want := range [][]string{
		{f.underWay, "automation", "processing", `automation "Order shipped"`, "3", "2025-06-02 09:02:00Z", "-"},
		{f.completed, "campaign", "completed", `campaign "Spring sale" to segment "VIP customers"`, "3", "2025-06-02 09:01:00Z", "2025-06-02 09:02:00Z"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %d lacks %q: %s", i+1, w, lines[i+1])
			}
		}
	}
	if strings.Contains(r.stdout, f.foreign) || strings.Contains(r.stdout, "more:") {
		t.Errorf("another company's batch, or a next page, listed:\n%s", r.stdout)
	}

	var page batchListView
	s.jsonOK(&page, "batches", "list", "--company", "acme", "--limit", "1")
	if len(page.Batches) != 1 || page.Batches[0].ID != f.underWay || page.NextCursor == nil ||
		page.Batches[0].AutomationName != "Order shipped" || page.Batches[0].Counts != nil {
		t.Fatalf("first page %+v", page)
	}
	r = s.ok("batches", "list", "--company", "acme", "--limit", "1")
	if !strings.Contains(r.stdout, "more: --cursor "+*page.NextCursor) {
		t.Errorf("the next cursor is not printed:\n%s", r.stdout)
	}
	var next batchListView
	s.jsonOK(&next, "batches", "list", "--company", "acme", "--limit", "1", "--cursor", *page.NextCursor)
	if len(next.Batches) != 1 || next.Batches[0].ID != f.completed || next.NextCursor != nil ||
		next.Batches[0].CampaignName != "Spring sale" || next.Batches[0].SegmentName != "VIP customers" {
		t.Fatalf("second page %+v", next)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kind", "campaign"}, []string{f.completed}},
		{[]string{"--status", "processing"}, []string{f.underWay}},
		{[]string{"--source", "api:automations_send"}, []string{f.underWay}},
		{[]string{"--campaign", fmt.Sprint(f.campaign)}, []string{f.completed}},
		{[]string{"--automation", fmt.Sprint(f.automation)}, []string{f.underWay}},
		{[]string{"--since", "2025-06-02T09:01:30Z"}, []string{f.underWay}},
		{[]string{"--until", "2025-06-02T09:01:30Z"}, []string{f.completed}},
		{[]string{"--since", "2025-06-02T10:00:00Z"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var p batchListView
			s.jsonOK(&p, append([]string{"batches", "list", "--company", "acme"}, tc.args...)...)
			var got []string
			for _, b := range p.Batches {
				got = append(got, b.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if r := s.ok("batches", "list", "--company", "globex", "--kind", "campaign"); strings.TrimSpace(r.stdout) != "no batches" {
		t.Errorf("empty list: %q", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "sms"}, "--kind: kind must be one of campaign, automation, batch, connector"},
		{[]string{"--status", "done"}, "--status: status must be one of"},
		{[]string{"--limit", "0"}, "--limit: limit must be between 1 and 100"},
		{[]string{"--limit", "101"}, "--limit: limit must be between 1 and 100"},
		{[]string{"--cursor", "nope"}, "--cursor: cursor is not one this listing gave"},
		{[]string{"--since", "yesterday"}, `--since "yesterday"`},
		{[]string{"--since", "2025-06-02T10:00:00Z", "--until", "2025-06-02T09:00:00Z"}, "--until: until must be after since"},
		{[]string{"--campaign", "x"}, `invalid argument "x"`},
	} {
		t.Run("usage "+strings.Join(tc.args, " "), func(t *testing.T) {
			s.fails(ExitUsage, tc.want, append([]string{"batches", "list", "--company", "acme"}, tc.args...)...)
		})
	}
}

func TestBatchesShow(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()

	r := s.ok("batches", "show", f.completed, "--company", "acme")
	for _, want := range []string{"batch:     " + f.completed, "status:    completed", `sends:     campaign "Spring sale" to segment "VIP customers"`,
		"accepted:  2025-06-02 09:01:00Z", "completed: 2025-06-02 09:02:00Z"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	var v record.Batch
	s.jsonOK(&v, "batches", "show", f.completed, "--company", "acme")
	if v.ID != f.completed || v.Status != "completed" || v.Counts[record.StateDelivered] != 1 || v.Counts[record.StateFailed] != 1 ||
		v.Counts[record.StateRead] != 1 || len(v.Counts) != len(record.States) {
		t.Fatalf("show --json %+v", v)
	}

	// Still in the stream: found, accepted, its contacts counted, no messages yet.
	r = s.ok("batches", "show", f.pending, "--company", fmt.Sprint(f.acme))
	for _, want := range []string{"status:    accepted", "contacts:  40", "waiting in the stream", `campaign "Spring sale" to segment "VIP customers"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pending show lacks %q:\n%s", want, r.stdout)
		}
	}
	s.jsonOK(&v, "batches", "show", f.pending, "--company", "acme")
	if v.ID != f.pending || v.Status != "accepted" || v.ContactCount != 40 || v.CampaignID == nil || *v.CampaignID != f.campaign ||
		v.CampaignName != "Spring sale" || v.SegmentName != "VIP customers" {
		t.Fatalf("pending show --json %+v", v)
	}

	for _, id := range []string{f.foreign, uuid.Must(uuid.NewV7()).String(), "not-a-batch"} {
		s.fails(ExitFailure, "batch "+id+` not found in company "acme"`, "batches", "show", id, "--company", "acme")
	}
	// globex does not see acme's batches, recorded or in the stream.
	for _, id := range []string{f.completed, f.pending} {
		s.fails(ExitFailure, "batch "+id+` not found in company "globex"`, "batches", "show", id, "--company", "globex")
	}
	s.fails(ExitUsage, "takes one batch id", "batches", "show", "--company", "acme")

	// Held messages say why they wait.
	until := time.Date(2025, 6, 3, 9, 0, 0, 0, time.UTC)
	if _, err := s.pool.Exec(context.Background(), `UPDATE messages SET state = 'held', hold_reason = 'messaging_limit', not_before = $2
		WHERE batch_id = $1 AND state = 'delivered'`, f.completed, until); err != nil {
		t.Fatal(err)
	}
	r = s.ok("batches", "show", f.completed, "--company", "acme")
	if !regexp.MustCompile(`messaging_limit +1 +2025-06-03 09:00:00Z`).MatchString(r.stdout) {
		t.Errorf("show lacks the held messages with their reason and when they may go:\n%s", r.stdout)
	}
}

func TestBatchesMessages(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()

	r := s.ok("batches", "messages", f.completed, "--company", "acme")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "PHONE") {
		t.Fatalf("messages:\n%s", r.stdout)
	}
	for _, want := range []string{"+33612340001", "failed", "131026 Message undeliverable", "1", "wamid.HBgLMzM2MTIzNDAwMDEVAgARGBI"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("the failed message's row lacks %q: %s", want, lines[2])
		}
	}

	var page record.Page
	s.jsonOK(&page, "batches", "messages", f.completed, "--company", "acme", "--state", "failed,read")
	if len(page.Messages) != 2 || page.Messages[0].State != record.StateFailed || page.Messages[1].State != record.StateRead || page.NextCursor != nil {
		t.Fatalf("--state failed,read: %+v", page)
	}
	s.jsonOK(&page, "batches", "messages", f.completed, "--company", "acme", "--limit", "2")
	if len(page.Messages) != 2 || page.NextCursor == nil {
		t.Fatalf("--limit 2: %+v", page)
	}
	if r := s.ok("batches", "messages", f.completed, "--company", "acme", "--limit", "2"); !strings.Contains(r.stdout, "more: --cursor "+*page.NextCursor) {
		t.Errorf("the next cursor is not printed:\n%s", r.stdout)
	}
	s.jsonOK(&page, "batches", "messages", f.completed, "--company", "acme", "--limit", "2", "--cursor", *page.NextCursor)
	if len(page.Messages) != 1 || page.Messages[0].Seq != 2 || page.NextCursor != nil {
		t.Fatalf("second page: %+v", page)
	}

	// Still in the stream: no messages yet.
	if r := s.ok("batches", "messages", f.pending, "--company", "acme"); strings.TrimSpace(r.stdout) != "no messages" {
		t.Errorf("pending batch's messages: %q", r.stdout)
	}
	s.fails(ExitFailure, "batch "+f.foreign+` not found in company "acme"`, "batches", "messages", f.foreign, "--company", "acme")
	s.fails(ExitUsage, "--state: state must be one of", "batches", "messages", f.completed, "--company", "acme", "--state", "lost")
	s.fails(ExitUsage, "--limit: limit must be between 1 and 1000", "batches", "messages", f.completed, "--company", "acme", "--limit", "0")
	s.fails(ExitUsage, "--limit: limit must be between 1 and 1000", "batches", "messages", f.completed, "--company", "acme", "--limit", "1001")
	s.fails(ExitUsage, "--cursor: cursor is not one this batch's listing gave", "batches", "messages", f.completed, "--company", "acme", "--cursor", "x")
}

func TestBatchesCancel(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()

	// The automation's batch under way: its two queued messages, not the sent one.
	r := s.ok("batches", "cancel", f.underWay, "--company", "acme")
	if !strings.Contains(r.stdout, `cancelled 2 messages of batch `+f.underWay+` (automation "Order shipped")`) {
		t.Fatalf("cancel:\n%s", r.stdout)
	}
	var v cancelView
	s.jsonOK(&v, "batches", "cancel", f.underWay, "--company", "acme")
	if v.Cancelled != 0 || v.Batch.Counts[record.StateCancelled] != 2 || v.Batch.Counts[record.StateSent] != 1 || v.Batch.Status != "completed" {
		t.Fatalf("second cancel %+v", v)
	}
	if r := s.ok("batches", "cancel", f.underWay, "--company", "acme"); !strings.Contains(r.stdout, "nothing left to cancel") {
		t.Errorf("third cancel:\n%s", r.stdout)
	}

	// Still in the stream: recorded cancelled, all its contacts counted.
	s.jsonOK(&v, "batches", "cancel", f.pending, "--company", "acme")
	if v.Cancelled != 40 || v.Batch.Status != "cancelled" || v.Batch.Counts[record.StateCancelled] != 40 {
		t.Fatalf("pending cancel %+v", v)
	}
	var shown record.Batch
	s.jsonOK(&shown, "batches", "show", f.pending, "--company", "acme")
	if shown.Status != "cancelled" || shown.CancelledAt == nil {
		t.Fatalf("the pending batch after its cancel %+v", shown)
	}

	// Another company's batch, recorded or in the stream, is not found and unchanged.
	before := s.count("messages WHERE state = 'cancelled'")
	s.fails(ExitFailure, "batch "+f.foreign+` not found in company "acme"`, "batches", "cancel", f.foreign, "--company", "acme")
	s.fails(ExitFailure, "batch "+f.completed+` not found in company "globex"`, "batches", "cancel", f.completed, "--company", "globex")
	other := s.publishPending(f.acme, f.campaign, 0, 5, f.t0)
	s.fails(ExitFailure, "batch "+other+` not found in company "globex"`, "batches", "cancel", other, "--company", "globex")
	if after := s.count("messages WHERE state = 'cancelled'"); after != before {
		t.Errorf("a refused cancel cancelled messages: %d, then %d", before, after)
	}
	if n := s.count(fmt.Sprintf("batches WHERE id = '%s'", other)); n != 0 {
		t.Errorf("a refused cancel recorded the batch")
	}
}

// Without NATS, a recorded batch is still shown, listed and cancelled; an
// id not recorded cannot be told apart from one still in the stream, so it
// fails saying the stream could not be read, and nothing changes.
func TestBatchesWhenNATSIsDown(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()
	s.nats.Stop()
	if r := s.ok("batches", "show", f.completed, "--company", "acme"); !strings.Contains(r.stdout, "status:    completed") {
		t.Errorf("show:\n%s", r.stdout)
	}
	s.ok("batches", "list", "--company", "acme")
	s.ok("batches", "messages", f.completed, "--company", "acme")
	if r := s.ok("batches", "cancel", f.underWay, "--company", "acme"); !strings.Contains(r.stdout, "cancelled 2 messages") {
		t.Errorf("cancel:\n%s", r.stdout)
	}
	s.fails(ExitFailure, "the stream it may wait in cannot be read", "batches", "show", f.pending, "--company", "acme")
	s.fails(ExitFailure, "the stream it may wait in cannot be read", "batches", "cancel", f.pending, "--company", "acme")
	if n := s.count(fmt.Sprintf("batches WHERE id = '%s'", f.pending)); n != 0 {
		t.Errorf("a failed cancel recorded the batch")
	}
}
