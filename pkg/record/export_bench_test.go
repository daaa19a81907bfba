//go:build bench

package record_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/record"
)

// countingDiscard counts what it throws away.
type countingDiscard struct{ n int64 }

func (w *countingDiscard) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// heapPeak samples the Go heap every 5 ms until stop is called, and
// returns the largest HeapInuse and HeapAlloc it saw.
func heapPeak() (stop func() (inuse, alloc uint64)) {
	var peakInuse, peakAlloc atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peakInuse.Load() {
			peakInuse.Store(m.HeapInuse)
		}
		if m.HeapAlloc > peakAlloc.Load() {
			peakAlloc.Store(m.HeapAlloc)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() (uint64, uint64) {
		close(done)
		wg.Wait()
		sample()
		return peakInuse.Load(), peakAlloc.Load()
	}
}

// TestBenchExport exports 1,000,000 messages as CSV (make bench-export):
// 50 campaign sends of 19,000 messages (read window by window) and 50,000
// automation triggers of one (read in groups), with the outcomes, pricing,
// failures, replies and erased phones a real record has, streamed through
// the CSV writer to a counter. It prints the rows per second and the Go
// heap's peak, sampled every 5 ms, and fails when a row is missing or the
// peak reaches 64 MB: memory must not grow with the export.
func TestBenchExport(t *testing.T) {
	const (
		campaignBatches = 50
		perCampaign     = 19_000
		triggers        = 50_000
		want            = campaignBatches*perCampaign + triggers
		maxHeap         = 64 << 20
	)
	f := newFixture(t)
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	seedStart := time.Now()
	// A UUIDv7 at a time, as the gateway makes batch ids.
	f.exec(`CREATE FUNCTION pg_temp.v7(ts timestamptz, n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
		SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex(n % 4096), 3, '0')
			|| '8' || lpad(to_hex(n), 15, '0'))::uuid $$`)
	f.exec(`INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, status, accepted_at)
		SELECT pg_temp.v7($3::timestamptz + g * interval '1 hour', g), $1, 'campaign', 'api:campaigns_send', $2, $4, 'completed',
			$3::timestamptz + g * interval '1 hour'
		FROM generate_series(1, $5) g`, f.comp.ID, f.camp.ID, t0, perCampaign, campaignBatches)
	f.exec(`INSERT INTO batches (id, company_id, kind, source, automation_id, contact_count, status, accepted_at)
		SELECT pg_temp.v7($3::timestamptz + g * interval '30 seconds', 100000 + g), $1, 'automation', 'api:automations_send', $2, 1,
			'completed', $3::timestamptz + g * interval '30 seconds'
		FROM generate_series(1, $4) g`, f.comp.ID, f.auto.ID, t0, triggers)
	// Every batch's messages, in batch and seq order as an expansion
	// writes them: mostly read or delivered and billed, some failed, some
	// answered, some erased.
	f.exec(`INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state, error_code,
			error_title, created_at, updated_at, sent_at, delivered_at, read_at, failed_at, billable, pricing_category,
			pricing_model, replied_at, lane)
		SELECT b.id, s, $1,
			CASE WHEN s % 997 = 0 THEN '' ELSE '+3933' || lpad((s + 7919 * extract(epoch FROM b.accepted_at)::bigint % 1000000)::text, 8, '0') END,
			$2, $3,
			(CASE WHEN s % 50 = 0 THEN 'failed' WHEN s % 3 = 0 THEN 'delivered' ELSE 'read' END)::message_state,
			CASE WHEN s % 50 = 0 THEN 131026 END, CASE WHEN s % 50 = 0 THEN 'Message undeliverable' END,
			b.accepted_at, b.accepted_at + interval '40 seconds', b.accepted_at + interval '1 second',
			CASE WHEN s % 50 <> 0 THEN b.accepted_at + interval '3 seconds' END,
			CASE WHEN s % 50 <> 0 AND s % 3 <> 0 THEN b.accepted_at + interval '40 seconds' END,
			CASE WHEN s % 50 = 0 THEN b.accepted_at + interval '2 seconds' END,
			s % 50 <> 0, CASE WHEN s % 50 <> 0 THEN CASE WHEN b.kind = 'campaign' THEN 'marketing' ELSE 'utility' END END,
			CASE WHEN s % 50 <> 0 THEN 'PMP' END,
			CASE WHEN s % 20 = 1 THEN b.accepted_at + interval '5 minutes' END,
			CASE WHEN b.kind = 'campaign' THEN 'campaign' ELSE 'automation' END::dispatch_lane
		FROM batches b, generate_series(0, b.contact_count - 1) s
		WHERE b.company_id = $1
		ORDER BY b.id, s`, f.comp.ID, f.camp.MessagingAccountID, f.camp.TemplateID)
	f.exec(`ANALYZE batches`)
	f.exec(`ANALYZE messages`)
	t.Logf("seeded %d messages in %d batches in %v", want, campaignBatches+triggers, time.Since(seedStart).Round(time.Second))

	e, err := record.OpenExport(f.ctx, f.pool, nil, record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll,
		From: t0, To: t0.Add(60 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := heapPeak()
	out := &countingDiscard{}
	w := csvexport.NewWriter(out, csvexport.Options{})
	start := time.Now()
	if err := w.Write(record.ExportColumns); err != nil {
		t.Fatal(err)
	}
	var cells []string
	n, err := e.Each(f.ctx, func(r *record.ExportRow) error {
		cells = r.Cells(cells)
		return w.Write(cells)
	})
	if err == nil {
		err = w.Flush()
	}
	took := time.Since(start)
	peakInuse, peakAlloc := stop()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	mb := func(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
	t.Logf("exported %d rows (%s of CSV) in %v: %.0f rows/s, %.1f MB/s", n, mb(uint64(out.n)), took.Round(time.Millisecond),
		float64(n)/took.Seconds(), float64(out.n)/(1<<20)/took.Seconds())
	t.Logf("Go heap: %s in use before; peak %s in use, %s allocated and live; %d GCs; %.0f bytes allocated per row",
		mb(before.HeapInuse), mb(peakInuse), mb(peakAlloc), after.NumGC-before.NumGC,
		float64(after.TotalAlloc-before.TotalAlloc)/float64(n))
	if n != want {
		t.Fatalf("exported %d rows, want %d", n, want)
	}
	if peakInuse >= maxHeap {
		t.Fatalf("the heap peaked at %s: an export must not grow with its rows (limit %s)", mb(peakInuse), mb(maxHeap))
	}
}
