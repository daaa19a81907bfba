package contacts_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestOptOutSettingsMatch(t *testing.T) {
	s := contacts.DefaultOptOutSettings()
	s.OptOutPayloads = []string{"STOP_PROMOTIONS"}
	for _, tc := range []struct {
		text, payload string
		ok, out       bool
		reason, word  string
	}{
		{text: "STOP", ok: true, out: true, reason: "keyword", word: "STOP"},
		{text: "  stop\n", ok: true, out: true, reason: "keyword", word: "STOP"},
		{text: "Arrêt", ok: true, out: true, reason: "keyword", word: "ARRÊT"},
		{text: "baja", ok: true, out: true, reason: "keyword", word: "BAJA"},
		{text: "abmelden", ok: true, out: true, reason: "keyword", word: "ABMELDEN"},
		{text: "start", ok: true, out: false, reason: "keyword", word: "START"},
		{text: "UNSTOP ", ok: true, out: false, reason: "keyword", word: "UNSTOP"},
		{text: "stop please"},
		{text: "S T O P"},
		{},
		{payload: "STOP_PROMOTIONS", ok: true, out: true, reason: "button", word: "STOP_PROMOTIONS"},
		{payload: "stop_promotions"}, // payloads are exact
		{payload: "MORE"},
	} {
		out, reason, word, ok := s.Match(tc.text, tc.payload)
		if ok != tc.ok || out != tc.out || reason != tc.reason || word != tc.word {
			t.Errorf("Match(%q, %q) = %v %q %q %v", tc.text, tc.payload, out, reason, word, ok)
		}
	}
}

func TestOptOutSettingsNormalize(t *testing.T) {
	n, err := contacts.OptOutSettings{OptOutKeywords: []string{" basta", "Basta", "STOP"}, OptInKeywords: []string{"go"},
		OptOutPayloads: []string{" P1 "}}.Normalize()
	if err != nil || !slices.Equal(n.OptOutKeywords, []string{"BASTA", "STOP"}) || !slices.Equal(n.OptInKeywords, []string{"GO"}) ||
		!slices.Equal(n.OptOutPayloads, []string{"P1"}) {
		t.Fatalf("%+v %v", n, err)
	}
	long := make([]string, contacts.MaxKeywords+1)
	for i := range long {
		long[i] = string(rune('A'+i%26)) + string(rune('A'+i/26))
	}
	for _, bad := range []contacts.OptOutSettings{
		{OptOutKeywords: []string{""}},
		{OptOutKeywords: []string{"STOP"}, OptInKeywords: []string{"stop "}},
		{OptOutKeywords: []string{string(make([]byte, 65))}},
		{OptOutKeywords: long},
		{OptOutPayloads: []string{"  "}},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, contacts.ErrInvalidSettings) {
			t.Errorf("%+v: %v, want ErrInvalidSettings", bad, err)
		}
	}
}

// TestRecordConsentOrder: the contact's state is its latest request by
// time, whatever order they are recorded in; a redelivered message is
// recorded once; each flip appends one outbox event.
func TestRecordConsentOrder(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	storetest.Subscribe(t, pool, company) // its changes write their events
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	rec := func(out bool, wamid string, at time.Time) contacts.ConsentResult {
		t.Helper()
		r, err := contacts.RecordConsent(ctx, pool, contacts.ConsentChange{CompanyID: company, Phone: "393331111111", OptedOut: out,
			Reason: contacts.ReasonKeyword, Keyword: "X", ProviderMessageID: wamid, At: at}, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// START (sent second) arrives before STOP (sent first).
	if r := rec(false, "w2", t0.Add(time.Minute)); !r.Created || !r.Recorded || r.Changed || r.OptedOut {
		t.Fatalf("START first: %+v", r)
	}
	if r := rec(true, "w1", t0); !r.Recorded || r.Changed || r.OptedOut {
		t.Fatalf("the older STOP: %+v, want recorded without a change", r)
	}
	if r := rec(true, "w1", t0); r.Recorded {
		t.Fatalf("redelivered: %+v", r)
	}
	if r := rec(true, "w3", t0.Add(2*time.Minute)); !r.Changed || !r.OptedOut {
		t.Fatalf("a newer STOP: %+v", r)
	}
	c, err := contacts.NewStore(pool, nil).ByPhone(ctx, company, "+393331111111")
	if err != nil || c.OptedOutAt == nil || !c.OptedOutAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("contact %+v %v", c, err)
	}
	h, err := contacts.NewStore(pool, nil).OptOutHistory(ctx, company, c.ID)
	if err != nil || len(h) != 3 || h[0].ProviderMessageID != "w1" || h[2].ProviderMessageID != "w3" {
		t.Fatalf("history %+v %v", h, err)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox WHERE type = 'contact.opted_out'`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("%d opted_out events (%v)", events, err)
	}
	if _, err := contacts.RecordConsent(ctx, pool, contacts.ConsentChange{CompanyID: company, Phone: "abc", OptedOut: true, Reason: "keyword"},
		t0); !errors.Is(err, contacts.ErrInvalidPhone) {
		t.Fatalf("bad phone: %v", err)
	}
}
