package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/contacts"
)

func TestOptOutWords(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	var got contacts.OptOutSettings
	s.jsonOK(&got, "opt-out", "show", "--company", "acme")
	if !got.Default || !slices.Contains(got.OptOutKeywords, "STOP") || !slices.Contains(got.OptOutKeywords, "BAJA") ||
		!slices.Equal(got.OptInKeywords, []string{"START", "UNSTOP"}) {
		t.Fatalf("defaults %+v", got)
	}
	// Bad input: a usage error, nothing stored.
	for _, tc := range []struct{ want string }{{"nothing to set"}} {
		s.fails(ExitUsage, tc.want, "opt-out", "set", "--company", "acme")
	}
	s.fails(ExitUsage, `"START" is both`, "opt-out", "set", "--company", "acme", "--keywords", "STOP,start")
	s.fails(ExitUsage, "longer than 64", "opt-out", "set", "--company", "acme", "--keywords", strings.Repeat("x", 65))
	s.fails(ExitUsage, "an entry is empty", "opt-out", "set", "--company", "acme", "--keywords", "STOP, ,END")
	if n := s.count("company_opt_out_settings"); n != 0 {
		t.Fatalf("refused settings stored %d rows", n)
	}
	s.fails(ExitFailure, `company "nope" not found`, "opt-out", "show", "--company", "nope")

	s.jsonOK(&got, "opt-out", "set", "--company", "acme", "--keywords", " basta ,Stop,stop", "--button-payloads", "STOP_PROMOTIONS")
	if got.Default || !slices.Equal(got.OptOutKeywords, []string{"BASTA", "STOP"}) || !slices.Equal(got.OptInKeywords, []string{"START", "UNSTOP"}) ||
		!slices.Equal(got.OptOutPayloads, []string{"STOP_PROMOTIONS"}) {
		t.Fatalf("set %+v", got)
	}
	s.jsonOK(&got, "opt-out", "set", "--company", "acme", "--opt-in-keywords", "")
	if len(got.OptInKeywords) != 0 || !slices.Equal(got.OptOutKeywords, []string{"BASTA", "STOP"}) {
		t.Fatalf("emptied opt-in %+v", got)
	}
	if r := s.ok("opt-out", "show", "--company", "acme"); !strings.Contains(r.stdout, "BASTA, STOP") || !strings.Contains(r.stdout, "the company's own") {
		t.Fatalf("table:\n%s", r.stdout)
	}
	s.jsonOK(&got, "opt-out", "reset", "--company", "acme")
	if !got.Default || s.count("company_opt_out_settings") != 0 {
		t.Fatalf("reset %+v", got)
	}
}

func TestContactOptOutHistory(t *testing.T) {
	s := newStack(t)
	id := s.company("acme")
	ctx := context.Background()
	// A STOP received by the gateway, as pkg/delivery records it.
	if _, err := contacts.RecordConsent(ctx, s.pool, contacts.ConsentChange{CompanyID: id, Phone: "393331234567", OptedOut: true,
		Reason: contacts.ReasonKeyword, Keyword: "STOP", ProviderMessageID: "wamid.IN1", At: time.Now().Add(-time.Hour)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	var v contactView
	s.jsonOK(&v, "contacts", "show", "+393331234567", "--company", "acme")
	if !v.OptedOut || len(v.OptOutHistory) != 1 || v.OptOutHistory[0].Keyword != "STOP" || v.OptOutHistory[0].ProviderMessageID != "wamid.IN1" {
		t.Fatalf("%+v", v)
	}
	s.jsonOK(&v, "contacts", "opt-in", "393331234567", "--company", "acme")
	if v.OptedOut || len(v.OptOutHistory) != 2 || v.OptOutHistory[1].Reason != "operator" || v.OptOutHistory[1].OptedOut {
		t.Fatalf("after opt-in %+v", v)
	}
	r := s.ok("contacts", "show", "+393331234567", "--company", "acme")
	for _, want := range []string{"opt-out", "keyword", "STOP", "wamid.IN1", "opt-in", "operator"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	s.fails(ExitFailure, "not found", "contacts", "show", "+393339999999", "--company", "acme")
	s.fails(ExitUsage, "not a phone number", "contacts", "show", "12", "--company", "acme")
	s.fails(ExitUsage, "not a phone number", "contacts", "opt-out", "abc", "--company", "acme")
	if n := s.count("contacts"); n != 1 {
		t.Fatalf("%d contacts after refused commands", n)
	}
}
