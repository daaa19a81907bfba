// Package simtest serves provider-sim in-process for a test, as the
// templates' tests need it: no webhooks until the test points them
// somewhere, and reviews that wait for the test.
package simtest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// ReviewDelay is how long a created template stays PENDING unless the test
// reviews it (whatsappsim.Sim.ReviewTemplate): longer than any test.
const ReviewDelay = time.Hour

// Serve starts provider-sim on a loopback server for the test and returns
// it with its base URL; edit, when not nil, changes its rules after the
// review delay is set. Both stop with the test.
func Serve(t testing.TB, edit func(*whatsappsim.Rules)) (*whatsappsim.Sim, string) {
	t.Helper()
	sim, err := whatsappsim.New(whatsappsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	rules := sim.Rules()
	rules.TemplateReviewDelay = ReviewDelay
	if edit != nil {
		edit(&rules)
	}
	if err := sim.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	return sim, srv.URL
}
