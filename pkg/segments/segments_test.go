package segments_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
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
