package record_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/csvexport"
	"github.com/parleyhq/parley/pkg/record"
)

// idAt is a UUIDv7 batch id whose time is t (n tells apart the ids of one
// millisecond), as the gateway makes them at acceptance.
func idAt(t time.Time, n uint16) string {
	var id uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	id[6], id[7], id[8] = 0x70|byte(n>>8&0x0f), byte(n), 0x80
	return id.String()
}

// export reads an export into its rows' cells.
func (f *fixture) export(q record.ExportQuery) [][]string {
	f.t.Helper()
	e, err := record.OpenExport(f.ctx, f.pool, nil, q)
	if err != nil {
		f.t.Fatalf("open %+v: %v", q, err)
	}
	var out [][]string
	n, err := e.Each(f.ctx, func(r *record.ExportRow) error {
		out = append(out, r.Cells(nil))
		return nil
	})
	if err != nil || n != int64(len(out)) {
		f.t.Fatalf("export %+v: %d rows, %v", q, n, err)
	}
	return out
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// TestExportRows: the messages of a batch, a campaign, an automation or
// the company, chosen by when their batch was accepted; every column as
// the record holds it (pricing, a reply, an error, an erased phone); in
// batch and seq order; never another company's.
func TestExportRows(t *testing.T) {
	f := newFixture(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	f.now = t0
	campaign := func(at time.Time, n int, tag uint16) string {
		b := f.campaignBatch(n, nil)
		b.BatchId, b.AcceptedAt = idAt(at, tag), timestamppb.New(at)
		f.expand(b)
		return b.BatchId
	}
	a := campaign(t0, 3, 1)
	auto := &sendsv1.AutomationBatch{BatchId: idAt(t0.Add(30*time.Minute), 2), CompanyId: f.comp.ID, AutomationId: f.auto.ID,
		Contacts: []*sendsv1.AutomationContact{{Phone: "+14155550001"}}, AcceptedAt: timestamppb.New(t0)}
	if _, err := f.exp.Automation(f.ctx, auto); err != nil {
		t.Fatal(err)
	}
	b := campaign(t0.Add(time.Hour), 2, 3)
	before := campaign(t0.Add(-48*time.Hour), 1, 4)
	// Another company's batch, accepted in the range (it fails: the
	// campaign is not its own; it has its message all the same).
	foreign := idAt(t0.Add(10*time.Minute), 5)
	if _, err := f.exp.Campaign(f.ctx, &sendsv1.CampaignBatch{BatchId: foreign, CompanyId: f.other.ID, CampaignId: f.camp.ID,
		Phones: phones(1), AcceptedAt: timestamppb.New(t0)}); err != nil {
		t.Fatal(err)
	}

	sent, delivered, replied := t0.Add(time.Second), t0.Add(3*time.Second), t0.Add(90*time.Second+500*time.Millisecond)
	f.exec(`UPDATE messages SET state = 'delivered', sent_at = $2, delivered_at = $3, billable = true,
		pricing_category = 'marketing', pricing_model = 'PMP', replied_at = $4 WHERE batch_id = $1 AND seq = 0`, a, sent, delivered, replied)
	f.exec(`UPDATE messages SET state = 'failed', failed_at = $2, error_code = 131026, error_title = 'Message undeliverable',
		billable = false WHERE batch_id = $1 AND seq = 1`, a, sent)
	if _, err := record.EraseContact(f.ctx, f.pool, f.comp.ID, "+14155550002", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	from, to := t0.Add(-time.Hour), t0.Add(2*time.Hour)
	rows := f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportCampaign, SubjectID: f.camp.ID, From: from, To: to})
	ids := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r[1]+"/"+r[7])
		}
		return out
	}
	want := []string{a + "/+14155550000", a + "/+14155550001", a + "/", b + "/+14155550000", b + "/+14155550001"}
	if got := ids(rows); !slices.Equal(got, want) {
		t.Fatalf("campaign export: %q, want %q", got, want)
	}
	var id0 int64
	if err := f.pool.QueryRow(f.ctx, `SELECT id FROM messages WHERE batch_id = $1 AND seq = 0`, a).Scan(&id0); err != nil {
		t.Fatal(err)
	}
	wantRows := [][]string{
		{fmt.Sprint(id0), a, "campaign", "Summer", "", "hello", "main", "+14155550000", "delivered", "", "",
			"2026-03-02T10:00:00Z", "2026-03-02T10:00:01Z", "2026-03-02T10:00:03Z", "", "", "", "true", "marketing", "PMP",
			"true", "2026-03-02T10:01:30Z"},
		{fmt.Sprint(id0 + 1), a, "campaign", "Summer", "", "hello", "main", "+14155550001", "failed", "131026",
			"Message undeliverable", "2026-03-02T10:00:00Z", "", "", "", "2026-03-02T10:00:01Z", "", "false", "", "", "false", ""},
		// Erased: its phone is gone, its outcome stays (cancelled by the erasure).
		{fmt.Sprint(id0 + 2), a, "campaign", "Summer", "", "hello", "main", "", "cancelled", "", "",
			"2026-03-02T10:00:00Z", "", "", "", "", "2026-03-02T10:01:00Z", "", "", "", "false", ""},
	}
	for i, w := range wantRows {
		if !slices.Equal(rows[i], w) {
			t.Errorf("row %d:\n got %q\nwant %q", i, rows[i], w)
		}
	}
	if len(rows[0]) != len(record.ExportColumns) {
		t.Fatalf("%d cells for %d columns", len(rows[0]), len(record.ExportColumns))
	}

	all := f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll, From: from, To: to})
	want = []string{a + "/+14155550000", a + "/+14155550001", a + "/", auto.BatchId + "/+14155550001",
		b + "/+14155550000", b + "/+14155550001"}
	if got := ids(all); !slices.Equal(got, want) {
		t.Fatalf("the company's export: %q, want %q", got, want)
	}
	if r := all[3]; r[2] != "automation" || r[3] != "" || r[4] != "Shipped" || r[5] != "hello" || r[6] != "main" {
		t.Fatalf("automation row %q", r)
	}
	autoRows := f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAutomation, SubjectID: f.auto.ID, From: from, To: to})
	if got := ids(autoRows); !slices.Equal(got, []string{auto.BatchId + "/+14155550001"}) {
		t.Fatalf("automation export: %q", got)
	}
	one := f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportBatch, BatchID: strings.ToUpper(before)})
	if got := ids(one); !slices.Equal(got, []string{before + "/+14155550000"}) {
		t.Fatalf("batch export: %q", got)
	}
	// The range is by acceptance, to the millisecond: [from, to).
	if got := ids(f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll, From: t0.Add(30 * time.Minute),
		To: t0.Add(time.Hour)})); !slices.Equal(got, []string{auto.BatchId + "/+14155550001"}) {
		t.Fatalf("[t0+30m, t0+1h): %q", got)
	}
	if got := f.export(record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll, From: t0.Add(time.Millisecond),
		To: t0.Add(30*time.Minute - time.Nanosecond)}); len(got) != 0 {
		t.Fatalf("(t0, t0+30m): %q", ids(got))
	}

	// Through the CSV writer: the header, and the phones a spreadsheet
	// would read as formulas quoted.
	var buf bytes.Buffer
	w := csvexport.NewWriter(&buf, csvexport.Options{})
	if err := w.Write(record.ExportColumns); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(back) != 6 || !slices.Equal(back[0], record.ExportColumns) || back[1][7] != "'+14155550000" || back[3][7] != "" {
		t.Fatalf("CSV: %q, %v", back, err)
	}
}

// TestExportPagesAndWindows: more batches than a page, a batch larger than
// a query's window and batches that fill one together are read whole, in
// batch and seq order, once each.
func TestExportPagesAndWindows(t *testing.T) {
	f := newFixture(t)
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	// Sizes, in acceptance order: 1,200 automation triggers of one message,
	// then a large campaign send among sends that share queries.
	var sizes []int
	for range 1200 {
		sizes = append(sizes, 1)
	}
	sizes = append(sizes, 4000, 3000, 12001, 5000, 5001, 2)
	var batches []string
	for i, n := range sizes {
		id := idAt(t0.Add(time.Duration(i)*time.Second), uint16(i))
		batches = append(batches, id)
		kind, camp, auto := "campaign", &f.camp.ID, (*int64)(nil)
		if n == 1 {
			kind, camp, auto = "automation", nil, &f.auto.ID
		}
		f.exec(`INSERT INTO batches (id, company_id, kind, source, campaign_id, automation_id, contact_count, status, accepted_at)
			VALUES ($1, $2, $3::batch_kind, 'api:test', $4, $5, $6, 'completed', $7)`, id, f.comp.ID, kind, camp, auto, n, t0)
		f.exec(`INSERT INTO messages (batch_id, seq, company_id, phone, state, created_at, updated_at)
			SELECT $1, s, $2, '+1415' || lpad(s::text, 7, '0'), 'delivered', $3, $3 FROM generate_series(0, $4 - 1) s`,
			id, f.comp.ID, t0, n)
	}
	// An empty batch (accepted, failed before it had a message) is no row.
	f.exec(`INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at)
		VALUES ($1, $2, 'batch', 'api:test', 0, 'failed', $3)`, idAt(t0.Add(-time.Second), 0), f.comp.ID, t0)

	e, err := record.OpenExport(f.ctx, f.pool, nil, record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll,
		From: t0.Add(-time.Minute), To: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	lastBatch, lastSeq, total := "", -1, 0
	n, err := e.Each(f.ctx, func(r *record.ExportRow) error {
		switch {
		case r.BatchID < lastBatch, r.BatchID == lastBatch && r.Seq != lastSeq+1, r.BatchID > lastBatch && r.Seq != 0:
			return fmt.Errorf("batch %s seq %d after batch %s seq %d", r.BatchID, r.Seq, lastBatch, lastSeq)
		}
		lastBatch, lastSeq = r.BatchID, r.Seq
		count[r.BatchID]++
		total++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, id := range batches {
		want += sizes[i]
		if count[id] != sizes[i] {
			t.Errorf("batch %d (%d messages): %d rows", i, sizes[i], count[id])
		}
	}
	if n != int64(want) || total != want {
		t.Fatalf("%d rows (%d counted), want %d", n, total, want)
	}

	// An error of the callback stops the export and comes back as is.
	stop := errors.New("the client went away")
	seen := 0
	n, err = e.Each(f.ctx, func(*record.ExportRow) error {
		if seen++; seen == 7000 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 7000 {
		t.Fatalf("stopped: %d rows, %v", n, err)
	}
}

type streamOnly map[string]bool

func (s streamOnly) Batch(_ context.Context, companyID int64, batchID string) (record.Batch, error) {
	if s[batchID] {
		return record.Batch{ID: batchID, CompanyID: companyID}, nil
	}
	return record.Batch{}, record.ErrNotFound
}

// TestOpenExportRefuses: a range that is empty, backwards or over 366
// days is an *InvalidError; another company's batch, campaign or
// automation, or none, is ErrNotFound; a batch still in the stream is an
// export of no rows.
func TestOpenExportRefuses(t *testing.T) {
	f := newFixture(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	b := f.campaignBatch(1, nil)
	f.expand(b)
	for _, c := range []struct {
		from, to time.Time
		msg      string
	}{
		{t0, t0, "from must be before to"},
		{t0, t0.Add(-time.Second), "from must be before to"},
		{t0, t0.Add(366*24*time.Hour + time.Nanosecond), "the range is longer than 366 days: narrow it"},
	} {
		_, err := record.OpenExport(f.ctx, f.pool, nil, record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll, From: c.from, To: c.to})
		var inv *record.InvalidError
		if !errors.As(err, &inv) || inv.Field != "from" || inv.Msg != c.msg {
			t.Errorf("[%v, %v): %v", c.from, c.to, err)
		}
	}
	if _, err := record.OpenExport(f.ctx, f.pool, nil, record.ExportQuery{CompanyID: f.comp.ID, Scope: record.ExportAll,
		From: t0, To: t0.Add(366 * 24 * time.Hour)}); err != nil {
		t.Fatalf("366 days: %v", err)
	}

	pending := idAt(t0, 9)
	w := streamOnly{pending: true}
	for _, q := range []record.ExportQuery{
		{CompanyID: f.other.ID, Scope: record.ExportBatch, BatchID: b.BatchId},
		{CompanyID: f.comp.ID, Scope: record.ExportBatch, BatchID: idAt(t0, 10)},
		{CompanyID: f.comp.ID, Scope: record.ExportBatch, BatchID: "not-a-batch"},
		{CompanyID: f.other.ID, Scope: record.ExportBatch, BatchID: pending},
		{CompanyID: f.other.ID, Scope: record.ExportCampaign, SubjectID: f.camp.ID, From: t0, To: t0.Add(time.Hour)},
		{CompanyID: f.other.ID, Scope: record.ExportAutomation, SubjectID: f.auto.ID, From: t0, To: t0.Add(time.Hour)},
		{CompanyID: f.comp.ID, Scope: record.ExportAutomation, SubjectID: f.camp.ID + 1000, From: t0, To: t0.Add(time.Hour)},
	} {
		if _, err := record.OpenExport(f.ctx, f.pool, streamOnly{}, q); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("%+v: %v, want ErrNotFound", q, err)
		}
	}
	e, err := record.OpenExport(f.ctx, f.pool, w, record.ExportQuery{CompanyID: f.other.ID, Scope: record.ExportBatch, BatchID: pending})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Each(f.ctx, func(*record.ExportRow) error { return errors.New("no row expected") }); n != 0 || err != nil {
		t.Fatalf("a batch in the stream: %d rows, %v", n, err)
	}
}

// TestExportFilename: what the file is of, made safe for a header.
func TestExportFilename(t *testing.T) {
	from := time.Date(2026, 10, 29, 0, 0, 0, 0, time.UTC)
	to := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		e    record.Export
		want string
	}{
		{record.Export{Query: record.ExportQuery{Scope: record.ExportBatch, BatchID: "0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de"}},
			"batch-0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de.csv"},
		{record.Export{Query: record.ExportQuery{Scope: record.ExportCampaign, SubjectID: 7, From: from, To: to}, Name: "Black Friday!! (EU)"},
			"campaign-7-black-friday-eu_2026-10-29_2026-11-28.csv"},
		{record.Export{Query: record.ExportQuery{Scope: record.ExportAutomation, SubjectID: 4, From: from, To: to.Add(time.Hour)},
			Name: "Soldes d'été \"; rm"}, "automation-4-soldes-d-t-rm_2026-10-29_2026-11-29.csv"},
		{record.Export{Query: record.ExportQuery{Scope: record.ExportCampaign, SubjectID: 8, From: from, To: to}, Name: "夏"},
			"campaign-8_2026-10-29_2026-11-28.csv"},
		{record.Export{Query: record.ExportQuery{Scope: record.ExportAll, From: from.Add(-time.Hour), To: to}},
			"messages_2026-10-28_2026-11-28.csv"},
	} {
		if got := c.e.Filename(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e.Query, got, c.want)
		}
	}
}
