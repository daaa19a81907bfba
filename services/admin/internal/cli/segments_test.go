package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/segments"
)

// scheduledSend records a campaign batch to the segment scheduled for
// tomorrow, as a dispatcher's expansion does.
func (s *stack) scheduledSend(companyID, segmentID int64) string {
	s.t.Helper()
	ctx := context.Background()
	id, _ := uuid.NewV7()
	now := time.Now()
	at := now.Add(24 * time.Hour)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, _, err := record.LockBatch(ctx, tx, record.BatchRow{ID: id.String(), CompanyID: companyID, Kind: bus.BatchCampaign,
			Source: "api:campaigns_send", SegmentID: &segmentID, ContactCount: 1, ScheduledAt: &at, AcceptedAt: now}); err != nil {
			return err
		}
		n, err := record.InsertSegmentMessages(ctx, tx, record.NewMessages{BatchID: id.String(), CompanyID: companyID,
			AccountID: 1, TemplateID: 1, State: record.StateScheduled, NotBefore: at, At: now}, segmentID)
		if err != nil {
			return err
		}
		return record.FinishExpansion(ctx, tx, id.String(), record.BatchScheduled, n, "", now)
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return id.String()
}

func TestSegments(t *testing.T) {
	s := newStack(t)
	acme := s.company("acme")
	rival := s.company("rival")
	ctx := context.Background()
	store := segments.NewStore(s.pool, nil)
	ids := map[string]int64{}
	for _, n := range []string{"VIP", "Newsletter", "Leads"} {
		seg, err := store.Create(ctx, acme, n, []contacts.Upsert{{Phone: "+393330000001"}, {Phone: "+393330000002"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = seg.ID
	}
	if _, err := store.Create(ctx, rival, "Rival's", nil); err != nil {
		t.Fatal(err)
	}

	// list: by name, a page at a time, with the command for the next one.
	var page segments.Page
	s.jsonOK(&page, "segments", "list", "--company", "acme", "--limit", "2")
	if len(page.Segments) != 2 || page.Segments[0].Name != "Leads" || page.Segments[1].Name != "Newsletter" ||
		page.Segments[0].Contacts != 2 || page.NextCursor == nil {
		t.Fatalf("first page %+v", page)
	}
	s.jsonOK(&page, "segments", "list", "--company", "acme", "--limit", "2", "--cursor", *page.NextCursor)
	if len(page.Segments) != 1 || page.Segments[0].Name != "VIP" || page.NextCursor != nil {
		t.Fatalf("second page %+v", page)
	}
	r := s.ok("segments", "list", "--company", "acme", "--limit", "2")
	for _, want := range []string{"ID", "NAME", "CONTACTS", "Leads", "Newsletter", "more: parleyctl segments list --company acme --limit 2 --cursor "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "VIP") {
		t.Fatalf("the first page holds the third segment:\n%s", r.stdout)
	}

	// show and rename.
	var seg segments.Segment
	s.jsonOK(&seg, "segments", "show", fmtID(ids["VIP"]), "--company", "acme")
	if seg.ID != ids["VIP"] || seg.Name != "VIP" || seg.Contacts != 2 {
		t.Fatalf("show %+v", seg)
	}
	if r := s.ok("segments", "show", fmtID(ids["VIP"]), "--company", "acme"); !strings.Contains(r.stdout, "name:     VIP") {
		t.Fatalf("show table:\n%s", r.stdout)
	}
	s.jsonOK(&seg, "segments", "rename", fmtID(ids["VIP"]), "--company", "acme", "--name", "  Gold customers ")
	if seg.Name != "Gold customers" || seg.Contacts != 2 {
		t.Fatalf("renamed %+v", seg)
	}
	s.fails(ExitFailure, `A segment named "Leads" already exists: segment `+fmtID(ids["Leads"]), "segments", "rename", fmtID(ids["VIP"]), "--company", "acme", "--name", "Leads")
	s.fails(ExitFailure, `segment `+fmtID(ids["VIP"])+` not found in company "rival"`, "segments", "show", fmtID(ids["VIP"]), "--company", "rival")

	// delete: refused while a scheduled send waits for the segment.
	waiting := s.scheduledSend(acme, ids["Leads"])
	s.fails(ExitFailure, `Segment "Leads" is used by 1 scheduled send: cancel it first (parleyctl batches cancel <batch_id> --company acme): `+waiting,
		"segments", "delete", fmtID(ids["Leads"]), "--company", "acme")
	if _, err := record.Cancel(ctx, s.pool, acme, waiting); err != nil {
		t.Fatal(err)
	}
	var deleted struct {
		Deleted int64  `json:"deleted"`
		Name    string `json:"name"`
	}
	s.jsonOK(&deleted, "segments", "delete", fmtID(ids["Leads"]), "--company", "acme")
	if deleted.Deleted != ids["Leads"] || deleted.Name != "Leads" {
		t.Fatalf("deleted %+v", deleted)
	}
	s.fails(ExitFailure, "not found", "segments", "show", fmtID(ids["Leads"]), "--company", "acme")
	s.fails(ExitFailure, "not found", "segments", "delete", fmtID(ids["Leads"]), "--company", "acme")
	if r := s.ok("segments", "delete", fmtID(ids["Newsletter"]), "--company", "acme"); r.stdout != `deleted segment `+fmtID(ids["Newsletter"])+` "Newsletter" of company "acme"`+"\n" {
		t.Fatalf("delete said %q", r.stdout)
	}
	s.jsonOK(&page, "segments", "list", "--company", "acme")
	if len(page.Segments) != 1 || page.Segments[0].Name != "Gold customers" {
		t.Fatalf("after deletes %+v", page)
	}
	if n := s.count("contacts"); n != 2 {
		t.Fatalf("%d contacts after deletes, want 2", n)
	}

	// Usage mistakes: exit 2, nothing changes.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"segments"}, "parleyctl segments needs a subcommand"},
		{[]string{"segments", "show", "--company", "acme"}, "takes one segment id"},
		{[]string{"segments", "show", "abc", "--company", "acme"}, `segment id "abc" is not a positive integer`},
		{[]string{"segments", "rename", "1", "--company", "acme"}, `required flag(s) "name" not set`},
		{[]string{"segments", "rename", fmtID(ids["VIP"]), "--company", "acme", "--name", "  "}, "--name must be 1 to 255 characters"},
		{[]string{"segments", "rename", fmtID(ids["VIP"]), "--company", "acme", "--name", strings.Repeat("x", 256)}, "--name must be 1 to 255 characters"},
		{[]string{"segments", "list", "--company", "acme", "--limit", "0"}, "--limit must be 1 to 100"},
		{[]string{"segments", "list", "--company", "acme", "--cursor", "nope"}, `--cursor "nope" is not the next cursor`},
		{[]string{"segments", "list"}, `required flag(s) "company" not set`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s.fails(ExitUsage, tc.want, append(tc.args, "--json")...)
		})
	}
	s.jsonOK(&seg, "segments", "show", fmtID(ids["VIP"]), "--company", "acme")
	if seg.Name != "Gold customers" {
		t.Fatalf("a refused rename changed the name: %+v", seg)
	}
}
