package contacts_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/testkit/storetest"
)

func ptr(s string) *string { return &s }

func TestUpsertCreatesAndMergesVariables(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var company, other int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('other', 'Other') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	s := contacts.NewStore(pool, func() time.Time { return now })

	got, err := s.Upsert(ctx, company, []contacts.Upsert{
		{Phone: "393331111111", FirstName: ptr("Ada"), LastName: ptr("Lovelace"), Variables: map[string]string{"order": "A1", "city": "Rome"}},
		{Phone: "+393332222222"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ada := got["+393331111111"]
	if ada.ID == 0 || ada.FirstName != "Ada" || ada.LastName != "Lovelace" || !maps.Equal(ada.Variables, map[string]string{"order": "A1", "city": "Rome"}) {
		t.Fatalf("created = %+v", ada)
	}
	if b := got["+393332222222"]; b.ID == 0 || b.FirstName != "" || len(b.Variables) != 0 {
		t.Fatalf("created without data = %+v", b)
	}

	now = now.Add(time.Hour)
	got, err = s.Upsert(ctx, company, []contacts.Upsert{
		// Same phone twice in one call: merged in order, later wins.
		{Phone: "+393331111111", FirstName: ptr(""), Variables: map[string]string{"order": "B2"}},
		{Phone: "393331111111", LastName: ptr("King"), Variables: map[string]string{"coupon": "X", "order": "B3"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ada2 := got["+393331111111"]
	want := map[string]string{"order": "B3", "city": "Rome", "coupon": "X"}
	if ada2.ID != ada.ID || ada2.FirstName != "Ada" || ada2.LastName != "King" || !maps.Equal(ada2.Variables, want) {
		t.Fatalf("merged = %+v, want first name kept, last name King, variables %v", ada2, want)
	}
	if !ada2.UpdatedAt.Equal(now) || !ada2.CreatedAt.Equal(ada.CreatedAt) {
		t.Fatalf("timestamps = created %v updated %v", ada2.CreatedAt, ada2.UpdatedAt)
	}

	byPhone, err := s.ByPhone(ctx, company, "393331111111")
	if err != nil || byPhone.ID != ada.ID || !maps.Equal(byPhone.Variables, want) {
		t.Fatalf("by phone = %+v, %v", byPhone, err)
	}
	if _, err := s.ByPhone(ctx, other, "+393331111111"); !errors.Is(err, contacts.ErrNotFound) {
		t.Fatalf("another company's contact: %v", err)
	}
	if _, err := s.ByPhone(ctx, company, "12"); !errors.Is(err, contacts.ErrInvalidPhone) {
		t.Fatalf("bad phone: %v", err)
	}
	if _, err := s.Upsert(ctx, company, []contacts.Upsert{{Phone: "abc"}}); !errors.Is(err, contacts.ErrInvalidPhone) {
		t.Fatalf("upsert bad phone: %v", err)
	}
}

func TestSetOptedOut(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	s := contacts.NewStore(pool, func() time.Time { return now })

	c, err := s.SetOptedOut(ctx, company, "+15550001111", true)
	if err != nil || !c.OptedOut() || !c.OptedOutAt.Equal(now) {
		t.Fatalf("opt out unknown contact = %+v, %v", c, err)
	}
	first := *c.OptedOutAt
	now = now.Add(time.Hour)
	if c, err = s.SetOptedOut(ctx, company, "15550001111", true); err != nil || !c.OptedOutAt.Equal(first) {
		t.Fatalf("opting out again keeps the first time: %+v, %v", c, err)
	}
	if c, err = s.SetOptedOut(ctx, company, "15550001111", false); err != nil || c.OptedOut() {
		t.Fatalf("opt in = %+v, %v", c, err)
	}
}
