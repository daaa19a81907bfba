package delivery

import (
	"testing"
	"time"
)

// BenchmarkExpandSegment50k expands a campaign batch whose segment has
// 50,000 members (one INSERT ... SELECT in the expansion transaction) and
// reports the time per batch and members per second. Run:
//
//	go test -run '^$' -bench ExpandSegment50k -benchtime 3x ./delivery/
func BenchmarkExpandSegment50k(b *testing.B) {
	const members = 50_000
	f := newFixture(b)
	var segment int64
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO segments (company_id, name) VALUES ($1, 'all') RETURNING id`, f.company.ID).Scan(&segment); err != nil {
		b.Fatal(err)
	}
	f.exec(`INSERT INTO contacts (company_id, phone) SELECT $1, unnest($2::text[])`, f.company.ID, phones(members))
	f.exec(`INSERT INTO segment_members (segment_id, contact_id) SELECT $1, id FROM contacts WHERE company_id = $2`, segment, f.company.ID)
	f.exec(`ANALYZE`)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		bt := f.campaignBatch(nil, false, nil)
		bt.SegmentId = segment
		exp, err := x.Campaign(f.ctx, bt)
		if err != nil || exp.Messages != members {
			b.Fatalf("expansion = %+v, %v", exp, err)
		}
	}
	b.ReportMetric(float64(members*b.N)/time.Since(start).Seconds(), "members/s")
}
