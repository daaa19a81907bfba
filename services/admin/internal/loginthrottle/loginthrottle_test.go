package loginthrottle_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/admin/internal/loginthrottle"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestNetwork(t *testing.T) {
	cases := map[string]string{
		"203.0.113.7":              "203.0.113.7",
		"::ffff:203.0.113.7":       "203.0.113.7",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":     "2001:db8:1:2::/64",
		"2001:db8:1:3::1":          "2001:db8:1:3::/64",
		"::1":                      "::/64",
		"fe80::1234:5678:9abc:def": "fe80::/64",
	}
	for in, want := range cases {
		if got := loginthrottle.Network(netip.MustParseAddr(in)); got != want {
			t.Errorf("Network(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestThrottle(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	th := loginthrottle.New(pool, loginthrottle.Limits{PerEmail: 3, PerIP: 5, Window: 10 * time.Minute}, clock)
	home := netip.MustParseAddr("198.51.100.1")
	cafe := netip.MustParseAddr("198.51.100.2")

	wait := func(email string, ip netip.Addr) time.Duration {
		t.Helper()
		w, err := th.Check(ctx, email, ip)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	fail := func(email string, ip netip.Addr) {
		t.Helper()
		if err := th.RecordFailure(ctx, email, ip); err != nil {
			t.Fatal(err)
		}
	}

	// Per email: the third failure within the window locks the address,
	// from any network, until the first of the three ages out.
	for i := range 3 {
		if w := wait("ada@example.com", home); w != 0 {
			t.Fatalf("before failure %d: wait %v", i+1, w)
		}
		fail("ada@example.com", home)
		now = now.Add(time.Minute)
	}
	// Failures at 12:00, 12:01, 12:02; now 12:03. The 12:00 one leaves at 12:10.
	if w := wait("ada@example.com", cafe); w != 7*time.Minute {
		t.Fatalf("after 3 failures: wait %v, want 7m", w)
	}
	if w := wait("bob@example.com", cafe); w != 0 {
		t.Fatalf("another address from another network is throttled: %v", w)
	}
	now = now.Add(7*time.Minute - time.Second)
	if w := wait("ada@example.com", home); w != time.Second {
		t.Fatalf("just before the window moves: wait %v, want 1s", w)
	}
	now = now.Add(time.Second)
	if w := wait("ada@example.com", home); w != 0 {
		t.Fatalf("once the oldest failure left the window: wait %v", w)
	}

	// Per network: failures for many addresses from one network add up.
	// home has 3 failures (12:00-12:02, now 12:10: the first is out).
	for _, email := range []string{"c@example.com", "d@example.com", "e@example.com"} {
		fail(email, home)
	}
	if w := wait("fresh@example.com", home); w != 10*time.Minute-9*time.Minute {
		t.Fatalf("5 failures from one network: wait %v, want 1m", w)
	}
	if w := wait("fresh@example.com", cafe); w != 0 {
		t.Fatalf("another network is throttled: %v", w)
	}

	// Reset clears the address, not the network.
	fail("ada@example.com", cafe)
	fail("ada@example.com", cafe)
	if w := wait("ada@example.com", cafe); w == 0 {
		t.Fatal("ada not throttled after 3 failures in the window")
	}
	if err := th.Reset(ctx, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	if w := wait("ada@example.com", cafe); w != 0 {
		t.Fatalf("after Reset: wait %v", w)
	}
	if w := wait("ada@example.com", home); w == 0 {
		t.Fatal("Reset cleared the network's failures too")
	}

	// Old failures are pruned as new ones arrive.
	now = now.Add(time.Hour)
	fail("z@example.com", cafe)
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM login_failures`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d rows after pruning, want the 2 of the last failure", rows)
	}
}
