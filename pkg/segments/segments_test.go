package segments_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/segments"
	"github.com/parleyhq/parley/testkit/storetest"
)

func ptr(s string) *string { return &s }

func setup(t *testing.T, maxSegments int) (*segments.Store, *catalog.Store, catalog.Company, *contacts.Store) {
	t.Helper()
	_, pool := storetest.NewDatabase(t)
	cat := catalog.NewStore(pool, nil)
	co, err := cat.CreateCompany(context.Background(), catalog.NewCompany{Slug: "acme", Name: "Acme", MaxSegments: maxSegments})
	if err != nil {
		t.Fatal(err)
	}
	return segments.NewStore(pool, nil), cat, co, contacts.NewStore(pool, nil)
}

func TestCreateAndAdd(t *testing.T) {
	ctx := context.Background()
	s, cat, co, book := setup(t, 10)
	// A contact the company has already: names given are set, variables merged.
	if _, err := book.Upsert(ctx, co.ID, []contacts.Upsert{{Phone: "+393330000001", FirstName: ptr("Old"), LastName: ptr("Keep"),
		Variables: map[string]string{"tier": "silver", "city": "Rome"}}}); err != nil {
		t.Fatal(err)
	}
	seg, err := s.Create(ctx, co.ID, "VIP", []contacts.Upsert{
		{Phone: "393330000001", FirstName: ptr("Ana"), Variables: map[string]string{"tier": "gold"}},
		{Phone: "+393330000002"},
		{Phone: "+393330000002", LastName: ptr("Twice")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if seg.ID == 0 || seg.Name != "VIP" || seg.Contacts != 2 || seg.CreatedAt.IsZero() {
		t.Fatalf("created %+v", seg)
	}
	c, err := book.ByPhone(ctx, co.ID, "+393330000001")
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstName != "Ana" || c.LastName != "Keep" || c.Variables["tier"] != "gold" || c.Variables["city"] != "Rome" {
		t.Fatalf("existing contact after the segment: %+v", c)
	}
	if c, err := book.ByPhone(ctx, co.ID, "+393330000002"); err != nil || c.LastName != "Twice" {
		t.Fatalf("new contact: %+v %v", c, err)
	}

	added, err := s.AddContacts(ctx, co.ID, seg.ID, []contacts.Upsert{{Phone: "+393330000002"}, {Phone: "+393330000003"}, {Phone: "+393330000003"}})
	if err != nil {
		t.Fatal(err)
	}
	if added != (segments.Added{SegmentID: seg.ID, Added: 1, Contacts: 3}) {
		t.Fatalf("added %+v", added)
	}
	if n, err := s.Size(ctx, co.ID, seg.ID); err != nil || n != 3 {
		t.Fatalf("size %d %v", n, err)
	}

	// Another company sees none of it.
	rival, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "rival", Name: "Rival"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Size(ctx, rival.ID, seg.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival size: %v", err)
	}
	if _, err := s.AddContacts(ctx, rival.ID, seg.ID, []contacts.Upsert{{Phone: "+393330000009"}}); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival add: %v", err)
	}
	if _, err := book.ByPhone(ctx, rival.ID, "+393330000009"); !errors.Is(err, contacts.ErrNotFound) {
		t.Fatalf("a refused add created a contact: %v", err)
	}
	// The same name is free in another company.
	if _, err := s.Create(ctx, rival.ID, "VIP", nil); err != nil {
		t.Fatal(err)
	}
}

func TestNameTakenAndLimit(t *testing.T) {
	ctx := context.Background()
	s, cat, co, book := setup(t, 2)
	first, err := s.Create(ctx, co.ID, "VIP", nil)
	if err != nil {
		t.Fatal(err)
	}
	var taken *segments.NameTakenError
	_, err = s.Create(ctx, co.ID, "VIP", []contacts.Upsert{{Phone: "+393330000001"}})
	if !errors.As(err, &taken) || taken.ID != first.ID || err.Error() != fmt.Sprintf(`A segment named "VIP" already exists: segment %d`, first.ID) {
		t.Fatalf("duplicate name: %v", err)
	}
	// Names are case-sensitive.
	if _, err := s.Create(ctx, co.ID, "vip", nil); err != nil {
		t.Fatal(err)
	}
	var limit *segments.LimitError
	if _, err := s.Create(ctx, co.ID, "third", []contacts.Upsert{{Phone: "+393330000002"}}); !errors.As(err, &limit) || limit.Max != 2 {
		t.Fatalf("over the limit: %v", err)
	}
	// A refused create changes nothing: no contact was created.
	for _, p := range []string{"+393330000001", "+393330000002"} {
		if _, err := book.ByPhone(ctx, co.ID, p); !errors.Is(err, contacts.ErrNotFound) {
			t.Fatalf("contact %s after refused creates: %v", p, err)
		}
	}
	// Raising the allowance makes room.
	three := 3
	if _, err := cat.UpdateCompany(ctx, co.ID, catalog.CompanyUpdate{MaxSegments: &three}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, co.ID, "third", nil); err != nil {
		t.Fatal(err)
	}
}

// TestLastPlaceIsTakenOnce: many concurrent creates at max-1 let exactly one
// through.
func TestLastPlaceIsTakenOnce(t *testing.T) {
	ctx := context.Background()
	s, _, co, _ := setup(t, 3)
	for _, n := range []string{"a", "b"} {
		if _, err := s.Create(ctx, co.ID, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	const racers = 8
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Create(ctx, co.ID, fmt.Sprintf("racer-%d", i), []contacts.Upsert{{Phone: fmt.Sprintf("+39333000%04d", i)}})
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	ok, limited := 0, 0
	for err := range errs {
		var limit *segments.LimitError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &limit):
			limited++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 || limited != racers-1 {
		t.Fatalf("%d creates succeeded and %d were limited, want 1 and %d", ok, limited, racers-1)
	}
}

func TestClock(t *testing.T) {
	_, pool := storetest.NewDatabase(t)
	cat := catalog.NewStore(pool, nil)
	co, err := cat.CreateCompany(context.Background(), catalog.NewCompany{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	seg, err := segments.NewStore(pool, func() time.Time { return at }).Create(context.Background(), co.ID, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !seg.CreatedAt.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("created_at %s", seg.CreatedAt)
	}
}

func TestListPagesByName(t *testing.T) {
	ctx := context.Background()
	s, cat, co, _ := setup(t, 10)
	for _, n := range []string{"delta", "alpha", "charlie", "bravo", "echo"} {
		if _, err := s.Create(ctx, co.ID, n, []contacts.Upsert{{Phone: "+393330000001"}}); err != nil {
			t.Fatal(err)
		}
	}
	rival, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "rival", Name: "Rival"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rival.ID, "aaa", nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the listing does not end")
		}
		p, err := s.List(ctx, co.ID, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range p.Segments {
			if seg.Contacts != 1 {
				t.Fatalf("size of %+v", seg)
			}
			got = append(got, seg.Name)
		}
		if p.NextCursor == nil {
			if len(p.Segments) != 1 {
				t.Fatalf("last page has %d", len(p.Segments))
			}
			break
		}
		cursor = *p.NextCursor
	}
	if fmt.Sprint(got) != "[alpha bravo charlie delta echo]" {
		t.Fatalf("listed %v", got)
	}
	all, err := s.List(ctx, co.ID, 0, "")
	if err != nil || len(all.Segments) != 5 || all.NextCursor != nil {
		t.Fatalf("default page: %+v %v", all, err)
	}
	empty, err := s.List(ctx, 987654, 0, "")
	if err != nil || empty.Segments == nil || len(empty.Segments) != 0 {
		t.Fatalf("no segments: %#v %v", empty, err)
	}
	for _, bad := range []string{"x", "djE6YmF0Y2hlczox", "djE6c2VnbWVudHM6MDph"} {
		if _, err := s.List(ctx, co.ID, 2, bad); !errors.Is(err, segments.ErrInvalidCursor) {
			t.Fatalf("cursor %q: %v", bad, err)
		}
	}
}

func TestGetAndRename(t *testing.T) {
	ctx := context.Background()
	s, cat, co, _ := setup(t, 10)
	vip, err := s.Create(ctx, co.ID, "VIP", []contacts.Upsert{{Phone: "+393330000001"}, {Phone: "+393330000002"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Create(ctx, co.ID, "Other", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, co.ID, vip.ID)
	if err != nil || got.ID != vip.ID || got.Name != "VIP" || got.Contacts != 2 || !got.CreatedAt.Equal(vip.CreatedAt) {
		t.Fatalf("get %+v %v, want %+v", got, err, vip)
	}
	renamed, err := s.Rename(ctx, co.ID, vip.ID, "Gold")
	if err != nil || renamed.Name != "Gold" || renamed.Contacts != 2 || renamed.ID != vip.ID {
		t.Fatalf("rename %+v %v", renamed, err)
	}
	// Its own name is no change; another's is taken.
	if same, err := s.Rename(ctx, co.ID, vip.ID, "Gold"); err != nil || same.Name != "Gold" {
		t.Fatalf("rename to itself %+v %v", same, err)
	}
	var taken *segments.NameTakenError
	if _, err := s.Rename(ctx, co.ID, vip.ID, "Other"); !errors.As(err, &taken) || taken.ID != other.ID {
		t.Fatalf("rename to a taken name: %v", err)
	}
	if got, _ := s.Get(ctx, co.ID, vip.ID); got.Name != "Gold" {
		t.Fatalf("a refused rename changed the name: %+v", got)
	}
	// The old name is free again.
	if _, err := s.Create(ctx, co.ID, "VIP", nil); err != nil {
		t.Fatal(err)
	}
	rival, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "rival", Name: "Rival"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, rival.ID, vip.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival get: %v", err)
	}
	if _, err := s.Rename(ctx, rival.ID, vip.ID, "Mine"); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival rename: %v", err)
	}
}

func TestRemoveContacts(t *testing.T) {
	ctx := context.Background()
	s, cat, co, book := setup(t, 10)
	seg, err := s.Create(ctx, co.ID, "VIP", []contacts.Upsert{{Phone: "+393330000001"}, {Phone: "+393330000002"}, {Phone: "+393330000003"}})
	if err != nil {
		t.Fatal(err)
	}
	// Without '+', twice, a contact not a member, a number no contact has.
	if _, err := book.Upsert(ctx, co.ID, []contacts.Upsert{{Phone: "+393330000008"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RemoveContacts(ctx, co.ID, seg.ID, []string{"393330000001", "+393330000001", "+393330000002", "+393330000008", "+393330000009"})
	if err != nil || got != (segments.Removed{SegmentID: seg.ID, Removed: 2, Contacts: 1}) {
		t.Fatalf("remove %+v %v", got, err)
	}
	// The contacts stay.
	if _, err := book.ByPhone(ctx, co.ID, "+393330000001"); err != nil {
		t.Fatalf("a removed member's contact: %v", err)
	}
	if again, err := s.RemoveContacts(ctx, co.ID, seg.ID, []string{"+393330000001"}); err != nil || again.Removed != 0 || again.Contacts != 1 {
		t.Fatalf("remove again %+v %v", again, err)
	}
	rival, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "rival", Name: "Rival"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveContacts(ctx, rival.ID, seg.ID, []string{"+393330000003"}); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival remove: %v", err)
	}
	if n, _ := s.Size(ctx, co.ID, seg.ID); n != 1 {
		t.Fatalf("size after a rival's remove: %d", n)
	}
}

// scheduleBatch records a campaign batch to the segment scheduled for
// tomorrow, as its expansion does (pkg/delivery): the batch, then one
// scheduled message per member.
func scheduleBatch(t *testing.T, pool *pgxpool.Pool, companyID, segmentID int64) string {
	t.Helper()
	ctx := context.Background()
	id, _ := uuid.NewV7()
	now := time.Now()
	at := now.Add(24 * time.Hour)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
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
		t.Fatal(err)
	}
	return id.String()
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	cat := catalog.NewStore(pool, nil)
	co, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme", MaxSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	s, book := segments.NewStore(pool, nil), contacts.NewStore(pool, nil)
	vip, err := s.Create(ctx, co.ID, "VIP", []contacts.Upsert{{Phone: "+393330000001"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, co.ID, "Other", nil); err != nil {
		t.Fatal(err)
	}

	// Refused while a recorded batch waits to send to it; nothing changes.
	first, second := scheduleBatch(t, pool, co.ID, vip.ID), scheduleBatch(t, pool, co.ID, vip.ID)
	var inUse *segments.InUseError
	err = s.Delete(ctx, co.ID, vip.ID)
	if !errors.As(err, &inUse) || fmt.Sprint(inUse.BatchIDs) != fmt.Sprint([]string{first, second}) ||
		err.Error() != `Segment "VIP" is used by 2 scheduled sends: cancel them first` {
		t.Fatalf("delete under waiting batches: %v", err)
	}
	if n, err := s.Size(ctx, co.ID, vip.ID); err != nil || n != 1 {
		t.Fatalf("after a refused delete: %d %v", n, err)
	}
	for _, id := range []string{first, second} {
		if _, err := record.Cancel(ctx, pool, co.ID, id); err != nil {
			t.Fatal(err)
		}
	}

	// Another company's is not found.
	rival, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "rival", Name: "Rival"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, rival.ID, vip.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rival delete: %v", err)
	}

	if err := s.Delete(ctx, co.ID, vip.ID); err != nil {
		t.Fatal(err)
	}
	// Deleted is not found everywhere; the contact stays.
	if _, err := s.Get(ctx, co.ID, vip.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := s.Size(ctx, co.ID, vip.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("size of deleted: %v", err)
	}
	if _, err := s.Rename(ctx, co.ID, vip.ID, "Back"); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("rename deleted: %v", err)
	}
	if _, err := s.AddContacts(ctx, co.ID, vip.ID, []contacts.Upsert{{Phone: "+393330000002"}}); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("add to deleted: %v", err)
	}
	if _, err := s.RemoveContacts(ctx, co.ID, vip.ID, []string{"+393330000001"}); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("remove from deleted: %v", err)
	}
	if err := s.Delete(ctx, co.ID, vip.ID); !errors.Is(err, segments.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := book.ByPhone(ctx, co.ID, "+393330000001"); err != nil {
		t.Fatalf("a deleted segment's contact: %v", err)
	}
	var members int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM segment_members WHERE segment_id = $1`, vip.ID).Scan(&members); err != nil || members != 0 {
		t.Fatalf("deleted segment has %d members (%v)", members, err)
	}
	if p, err := s.List(ctx, co.ID, 0, ""); err != nil || len(p.Segments) != 1 || p.Segments[0].Name != "Other" {
		t.Fatalf("list after delete: %+v %v", p, err)
	}
	// Its past batches still name it.
	if b, err := record.BatchStatus(ctx, pool, co.ID, first); err != nil || b.SegmentID == nil || *b.SegmentID != vip.ID || b.SegmentName != "VIP" {
		t.Fatalf("past batch %+v %v", b, err)
	}

	// Its name is free and its place counts no more (max_segments 2).
	again, err := s.Create(ctx, co.ID, "VIP", nil)
	if err != nil || again.ID == vip.ID {
		t.Fatalf("create the name again: %+v %v", again, err)
	}
	var limit *segments.LimitError
	if _, err := s.Create(ctx, co.ID, "third", nil); !errors.As(err, &limit) {
		t.Fatalf("max_segments counts live segments: %v", err)
	}
	if err := s.Delete(ctx, co.ID, again.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, co.ID, "third", nil); err != nil {
		t.Fatalf("a place freed by a delete: %v", err)
	}
}
