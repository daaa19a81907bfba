package drilltally_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/testkit/drilltally"
)

// TestCountPerRecipient: loss is the accepted phones the provider never
// received even when their rows are terminal; duplicates, strangers,
// failed, open and unrecorded rows are each counted and each is a problem.
func TestCountPerRecipient(t *testing.T) {
	phones := []string{"+1001", "+1002", "+1003", "+1004", "+1005"}
	rows := []drilltally.Row{
		{"+1001", "delivered"},
		{"+1002", "read"},
		{"+1003", "failed"},  // terminal, never sent: lost and failed
		{"+1004", "sending"}, // received, not recorded: unrecorded and open
		{"+1005", "sent"},
	}
	counts := map[string]int64{"+1001": 1, "+1002": 3, "+1004": 1, "+1005": 1}
	tl := drilltally.Count(phones, rows, counts, drilltally.SimStats{Accepted: 7})
	want := drilltally.Tally{Accepted: 5, Received: 4, Lost: 1, LostSample: []string{"+1003"}, Duplicates: 2, Strangers: 1,
		ProviderAccepted: 7, Rows: 5, Failed: 1, Open: 1, Unrecorded: 1}
	if tl.States["failed"] != 1 || tl.States["sending"] != 1 || len(tl.States) != 5 {
		t.Errorf("states %v", tl.States)
	}
	tl.States = nil
	if !reflect.DeepEqual(tl, want) {
		t.Fatalf("tally\n got %#v\nwant %#v", tl, want)
	}
	probs := tl.Problems(drilltally.Expect{DuplicateBound: 1})
	for _, p := range []string{"lost 1", "1 messages failed", "2 duplicated sends, beyond the bound of 1", "1 sends to phones the drill never accepted",
		"1 messages still open", "1 phones the provider received have no final row"} {
		if !slices.ContainsFunc(probs, func(s string) bool { return strings.Contains(s, p) }) {
			t.Errorf("problems %q miss %q", probs, p)
		}
	}
	if len(probs) != 6 {
		t.Errorf("%d problems, want 6: %q", len(probs), probs)
	}

	// What the drill provoked is allowed.
	clean := drilltally.Count(phones[:3], rows[:3], map[string]int64{"+1001": 1, "+1002": 2}, drilltally.SimStats{Accepted: 3})
	if p := clean.Problems(drilltally.Expect{DuplicateBound: 1, Failed: 1, NotSent: 1}); len(p) != 0 {
		t.Errorf("provoked outcomes reported: %q", p)
	}
	if p := clean.Problems(drilltally.Expect{Failed: 1, NotSent: 1}); len(p) != 1 {
		t.Errorf("a duplicate over a bound of 0: %q", p)
	}
}

// TestHeldIsOpen: a held message waits (for its template, the messaging
// limit): not final, so a tally settles only once it went on.
func TestHeldIsOpen(t *testing.T) {
	tl := drilltally.Count([]string{"+1001"}, []drilltally.Row{{"+1001", "held"}}, nil, drilltally.SimStats{})
	if tl.Open != 1 || tl.Lost != 1 || tl.Failed != 0 || tl.Missing != 0 {
		t.Fatalf("a held message: %s", tl)
	}
}

// TestMissingRows: an accepted phone without a row (its batch not yet
// expanded) is counted apart from those whose rows are there.
func TestMissingRows(t *testing.T) {
	tl := drilltally.Count([]string{"+1001", "+1002"}, []drilltally.Row{{"+1001", "failed"}}, nil, drilltally.SimStats{})
	if tl.Missing != 1 || tl.Open != 0 || tl.Lost != 2 {
		t.Fatalf("one phone failed, one without a row: %+v", tl)
	}
}

// TestSimCounts asks a real provider-sim (in-process, over HTTP) for more
// recipients than one request may name.
func TestSimCounts(t *testing.T) {
	const pnid, token = "1001", "tok"
	sim, err := whatsappsim.New(whatsappsim.Config{Accounts: []whatsappsim.Account{{PhoneNumberID: pnid, Token: token, ThroughputPerSecond: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	cl, err := whatsapp.NewClient(whatsapp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tpl := whatsapp.Template{Name: "t", Language: "en_US"}
	for _, to := range []string{"+15550000001", "+15550000001", "+15550012000"} {
		if _, err := cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: pnid, AccessToken: token}, tpl,
			whatsapp.Recipient{Phone: to}, whatsapp.Overrides{}); err != nil {
			t.Fatal(err)
		}
	}
	phones := make([]string, 12_001)
	for i := range phones {
		phones[i] = fmt.Sprintf("+155500%05d", i)
	}
	counts, err := drilltally.Sim{URL: srv.URL}.Counts(context.Background(), phones)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(phones) || counts["+15550000001"] != 2 || counts["+15550012000"] != 1 || counts["+15550000002"] != 0 {
		t.Fatalf("%d counts: %d %d %d", len(counts), counts["+15550000001"], counts["+15550012000"], counts["+15550000002"])
	}
	st, err := drilltally.Sim{URL: srv.URL}.Stats(context.Background())
	if err != nil || st.Accepted != 3 {
		t.Fatalf("stats %+v %v", st, err)
	}
}
