// Package drilltally counts what a crash drill (or any end-to-end run
// against provider-sim) did to the contacts it had accepted, outside the
// system under test: per recipient at provider-sim, the stand-in for the
// WhatsApp Cloud API, and per row in PostgreSQL.
//
// Loss is the set difference "accepted phones the provider never received",
// not a count of terminal rows (a row can be terminal and never sent:
// failed, skipped). Duplicates are the provider's sends beyond the first to
// an accepted phone. A message the drill did not provoke to fail must not
// be failed. Every drill, whatever it breaks (one dispatcher, a cluster, a
// compose stack), counts with Take and checks with Tally.Problems, so that
// "lost 0" means the same everywhere.
package drilltally

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// lookupChunk is how many recipients one POST /_sim/recipients/counts asks
// about (provider-sim's limit, whatsappsim.MaxCountsLookup).
const lookupChunk = 10_000

// Sim reads provider-sim's inspection endpoints over HTTP.
type Sim struct {
	// URL is provider-sim's base URL (http://127.0.0.1:9090).
	URL string
	// Client defaults to a client with a 30 s timeout.
	Client *http.Client
}

// SimStats is the part of GET /_sim/stats a tally reads.
type SimStats struct {
	Requests       int64            `json:"requests"`
	Accepted       int64            `json:"accepted"`
	Errors         map[string]int64 `json:"errors"`
	Recipients     int              `json:"recipients"`
	UntrackedSends int64            `json:"untracked_sends"`
}

func (s Sim) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (s Sim) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client().Do(req)
	if err != nil {
		return fmt.Errorf("provider-sim %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("provider-sim %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("provider-sim %s %s: %w", method, path, err)
	}
	return nil
}

// Stats reads GET /_sim/stats.
func (s Sim) Stats(ctx context.Context) (SimStats, error) {
	var st SimStats
	return st, s.do(ctx, http.MethodGet, "/_sim/stats", nil, &st)
}

// Counts is how many sends provider-sim accepted for each phone (0 for one
// it never received), keyed as given.
func (s Sim) Counts(ctx context.Context, phones []string) (map[string]int64, error) {
	out := make(map[string]int64, len(phones))
	for chunk := range slices.Chunk(phones, lookupChunk) {
		var resp struct {
			Counts []struct {
				To    string `json:"to"`
				Count int64  `json:"count"`
			} `json:"counts"`
		}
		if err := s.do(ctx, http.MethodPost, "/_sim/recipients/counts", map[string]any{"to": chunk}, &resp); err != nil {
			return nil, err
		}
		if len(resp.Counts) != len(chunk) {
			return nil, fmt.Errorf("provider-sim answered %d counts for %d recipients", len(resp.Counts), len(chunk))
		}
		for i, c := range resp.Counts {
			out[chunk[i]] = c.Count
		}
	}
	return out, nil
}

// Tally is what became of a drill's accepted contacts at one moment.
type Tally struct {
	// Accepted is the distinct phones the drill had accepted (202 or
	// publish ack).
	Accepted int
	// Received is the accepted phones the provider received at least once.
	Received int
	// Lost is the accepted phones the provider never received; LostSample
	// names up to ten of them.
	Lost       int
	LostSample []string
	// Duplicates is the provider's sends beyond the first to an accepted
	// phone.
	Duplicates int64
	// Strangers is the sends the provider accepted for phones the drill
	// never accepted (nothing should send them). Exact once the provider
	// is idle; in a snapshot of a moving run it also counts the sends that
	// arrived between reading the counts and the totals.
	Strangers int64
	// ProviderAccepted is every send the provider accepted.
	ProviderAccepted int64
	// Rows is the message rows of the accepted phones, States the same by
	// state.
	Rows   int
	States map[string]int
	// Failed is the rows in failed; Open the rows not yet final (queued,
	// scheduled, deferred, held, sending).
	Failed, Open int
	// Missing is the accepted phones with no message row yet (their batch
	// not yet expanded).
	Missing int
	// Unrecorded is the accepted phones the provider received whose row is
	// still open (or missing): taken right after a dispatcher was killed,
	// the most sends a restart may repeat (the duplicate bound).
	Unrecorded int
	// ProviderErrors is the provider's refusals by error code (130429, ...).
	ProviderErrors map[string]int64
}

// Take counts, at provider-sim and in the messages table of pool, what
// became of the accepted phones. A phone accepted twice counts once.
func Take(ctx context.Context, sim Sim, pool *pgxpool.Pool, accepted []string) (Tally, error) {
	phones := slices.Clone(accepted)
	slices.Sort(phones)
	phones = slices.Compact(phones)

	// The database first, then the provider: a row recorded sent was sent
	// before it was recorded, so the provider's counts are never older than
	// the rows they are compared with.
	var rows []Row
	res, err := pool.Query(ctx, `SELECT phone, state::text FROM messages WHERE phone = ANY($1::text[])`, phones)
	if err != nil {
		return Tally{}, fmt.Errorf("read message states: %w", err)
	}
	for res.Next() {
		var r Row
		if err := res.Scan(&r.Phone, &r.State); err != nil {
			res.Close()
			return Tally{}, err
		}
		rows = append(rows, r)
	}
	res.Close()
	if err := res.Err(); err != nil {
		return Tally{}, fmt.Errorf("read message states: %w", err)
	}
	counts, err := sim.Counts(ctx, phones)
	if err != nil {
		return Tally{}, err
	}
	st, err := sim.Stats(ctx)
	if err != nil {
		return Tally{}, err
	}
	if st.UntrackedSends > 0 {
		return Tally{}, fmt.Errorf("provider-sim stopped counting per recipient (%d untracked sends): raise PARLEY_PROVIDER_SIM_MAX_RECIPIENTS", st.UntrackedSends)
	}
	return Count(phones, rows, counts, st), nil
}

// Row is one message row: its phone and state.
type Row struct{ Phone, State string }

// Count is Take's arithmetic: phones are the distinct accepted phones, rows
// their message rows, counts the provider's sends per phone and st its
// totals.
func Count(phones []string, rows []Row, counts map[string]int64, st SimStats) Tally {
	t := Tally{Accepted: len(phones), States: map[string]int{}, ProviderAccepted: st.Accepted, ProviderErrors: st.Errors}
	open := make(map[string]bool, len(phones))
	final := make(map[string]bool, len(phones))
	for _, r := range rows {
		t.Rows++
		t.States[r.State]++
		switch r.State {
		case "queued", "scheduled", "deferred", "held", "sending":
			t.Open++
			open[r.Phone] = true
		case "failed":
			t.Failed++
			final[r.Phone] = true
		default:
			final[r.Phone] = true
		}
	}
	var toAccepted int64
	for _, p := range phones {
		if !open[p] && !final[p] {
			t.Missing++
		}
		n := counts[p]
		toAccepted += n
		if n == 0 {
			t.Lost++
			if len(t.LostSample) < 10 {
				t.LostSample = append(t.LostSample, p)
			}
			continue
		}
		t.Received++
		t.Duplicates += n - 1
		if open[p] || !final[p] {
			t.Unrecorded++
		}
	}
	t.Strangers = st.Accepted - toAccepted
	return t
}

// Settle takes tallies until nothing more will happen to the accepted
// phones (each has its message rows, and none is open: sent, or final
// without a send, such as failed), or within has passed, and returns the
// last one.
func Settle(ctx context.Context, sim Sim, pool *pgxpool.Pool, accepted []string, within time.Duration) (Tally, error) {
	deadline := time.Now().Add(within)
	for {
		t, err := Take(ctx, sim, pool, accepted)
		if err != nil || (t.Missing == 0 && t.Open == 0) || time.Now().After(deadline) {
			return t, err
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Expect is what a drill provoked, and so allows.
type Expect struct {
	// DuplicateBound is the most duplicated sends allowed: 0 unless the
	// drill killed a sender, then the Unrecorded of the tally taken at
	// the kill.
	DuplicateBound int64
	// Failed is how many failed rows the drill provoked (undeliverable
	// numbers, ...); any other failed row is a problem.
	Failed int
	// NotSent is how many accepted phones the drill expected the provider
	// never to receive (opted out, failed on purpose).
	NotSent int
}

// Problems lists every broken expectation, in words; none when the drill
// passed.
func (t Tally) Problems(e Expect) []string {
	var out []string
	if t.Lost != e.NotSent {
		out = append(out, fmt.Sprintf("lost %d: %d accepted phones never reached the provider (want %d), e.g. %v",
			t.Lost-e.NotSent, t.Lost, e.NotSent, t.LostSample))
	}
	if t.Failed != e.Failed {
		out = append(out, fmt.Sprintf("%d messages failed, the drill provoked %d", t.Failed, e.Failed))
	}
	if t.Duplicates > e.DuplicateBound {
		out = append(out, fmt.Sprintf("%d duplicated sends, beyond the bound of %d (the provider's sends not yet recorded at the kill)",
			t.Duplicates, e.DuplicateBound))
	}
	if t.Strangers != 0 {
		out = append(out, fmt.Sprintf("the provider accepted %d sends to phones the drill never accepted", t.Strangers))
	}
	if t.Rows != t.Accepted {
		out = append(out, fmt.Sprintf("%d message rows for %d accepted phones", t.Rows, t.Accepted))
	}
	if t.Open != 0 {
		out = append(out, fmt.Sprintf("%d messages still open (queued, scheduled, deferred, held or sending)", t.Open))
	}
	if t.Unrecorded != 0 {
		out = append(out, fmt.Sprintf("%d phones the provider received have no final row", t.Unrecorded))
	}
	return out
}

func (t Tally) String() string {
	return fmt.Sprintf("accepted %d phones: provider received %d, lost %d, duplicated sends %d, sends to strangers %d (provider accepted %d, errors %v); %d rows %v, failed %d, open %d, unrecorded %d",
		t.Accepted, t.Received, t.Lost, t.Duplicates, t.Strangers, t.ProviderAccepted, t.ProviderErrors, t.Rows, t.States, t.Failed, t.Open, t.Unrecorded)
}
