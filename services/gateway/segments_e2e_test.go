package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// The segment endpoints beyond create and add: list, read, rename, remove
// contacts, delete.

func (g *gw) segment(key string, id int64) response {
	g.t.Helper()
	return g.do(http.MethodGet, fmt.Sprintf("/api/segments/%d", id), key, nil)
}

func segmentJSON(t *testing.T, r response) (id int64, name string, size int) {
	t.Helper()
	m := r.json(t)
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["created_at"])); err != nil || len(m) != 4 {
		t.Fatalf("segment %s", r.body)
	}
	return int64(m["id"].(float64)), m["name"].(string), int(m["contacts"].(float64))
}

func TestSegmentList(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	empty := g.do(http.MethodGet, "/api/segments", co.key, nil)
	wantBody(t, empty, 200, `{"segments":[],"next_cursor":null}`)
	for _, n := range []string{"delta", "alpha", "charlie"} {
		createSegment(t, g, co.key, n, `{"phone":"+393330000001"}`)
	}
	createSegment(t, g, g.fresh().key, "another company's")

	first := g.do(http.MethodGet, "/api/segments?limit=2", co.key, nil)
	if first.status != 200 || first.header.Get("X-RateLimit-Limit") != "20" {
		t.Fatalf("%d %s %v", first.status, first.body, first.header)
	}
	page := first.json(t)
	segs := page["segments"].([]any)
	cursor, _ := page["next_cursor"].(string)
	if len(segs) != 2 || segs[0].(map[string]any)["name"] != "alpha" || segs[1].(map[string]any)["name"] != "charlie" ||
		segs[0].(map[string]any)["contacts"] != float64(1) || cursor == "" {
		t.Fatalf("first page %s", first.body)
	}
	second := g.do(http.MethodGet, "/api/segments?limit=2&cursor="+cursor, co.key, nil)
	page = second.json(t)
	if segs := page["segments"].([]any); second.status != 200 || len(segs) != 1 || segs[0].(map[string]any)["name"] != "delta" || page["next_cursor"] != nil {
		t.Fatalf("second page %s", second.body)
	}

	for q, want := range map[string]string{
		"limit=0":       `{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0"}]}`,
		"limit=101":     `{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 100","input":"101"}]}`,
		"limit=x":       `{"detail":[{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"}]}`,
		"cursor=":       `{"detail":[{"type":"cursor_invalid","loc":["query","cursor"],"msg":"cursor must be the next_cursor of a page of this listing","input":""}]}`,
		"cursor=bm9wZQ": `{"detail":[{"type":"cursor_invalid","loc":["query","cursor"],"msg":"cursor must be the next_cursor of a page of this listing","input":"bm9wZQ"}]}`,
	} {
		wantBody(t, g.do(http.MethodGet, "/api/segments?"+q, co.key, nil), 422, want)
	}
}

func TestSegmentReadAndRename(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	id := createSegment(t, g, co.key, "VIP", `{"phone":"+393330000001"}`, `{"phone":"+393330000002"}`)
	other := createSegment(t, g, co.key, "Newsletter")

	r := g.segment(co.key, id)
	if got, name, size := segmentJSON(t, r); r.status != 200 || got != id || name != "VIP" || size != 2 {
		t.Fatalf("read %d %s", r.status, r.body)
	}
	path := fmt.Sprintf("/api/segments/%d", id)
	r = g.do(http.MethodPatch, path, co.key, []byte(`{"name":"  Gold customers "}`))
	if got, name, size := segmentJSON(t, r); r.status != 200 || got != id || name != "Gold customers" || size != 2 {
		t.Fatalf("rename %d %s", r.status, r.body)
	}
	if r.header.Get("X-RateLimit-Limit") != "10" {
		t.Fatalf("rename limit headers %v", r.header)
	}
	// An Idempotency-Key is ignored (no replay header, no record).
	r = g.do(http.MethodPatch, path, co.key, []byte(`{"name":"Gold customers"}`), "Idempotency-Key", "same")
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("rename to its own name %d %s %v", r.status, r.body, r.header)
	}

	before := g.state()
	wantBody(t, g.do(http.MethodPatch, path, co.key, []byte(`{"name":"Newsletter"}`)), 409,
		fmt.Sprintf(`{"detail":"A segment named \"Newsletter\" already exists: segment %d","segment_id":%d}`, other, other))
	wantBody(t, g.do(http.MethodPatch, path, co.key, []byte(`{"name":" "}`)), 422,
		`{"detail":[{"type":"string_too_short","loc":["body","name"],"msg":"String should have at least 1 character","input":" ","ctx":{"min_length":1}}]}`)
	wantBody(t, g.do(http.MethodPatch, path, co.key, []byte(`{}`)), 422,
		`{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{}}]}`)
	rival := g.fresh()
	for _, p := range []string{path, "/api/segments/abc", "/api/segments/0", "/api/segments/99999999999999999999"} {
		wantDetail(t, g.do(http.MethodGet, p, rival.key, nil), 404, "Segment not found")
		wantDetail(t, g.do(http.MethodPatch, p, rival.key, []byte(`{"name":"Mine"}`)), 404, "Segment not found")
		wantDetail(t, g.do(http.MethodDelete, p, rival.key, nil), 404, "Segment not found")
		// One removal per second per company: each from a company of its own.
		wantDetail(t, g.do(http.MethodDelete, p+"/contacts", g.fresh().key, []byte(`{"contacts":["+393330000001"]}`)), 404, "Segment not found")
	}
	g.unchanged(before, "refused segment requests")
	if _, name, _ := segmentJSON(t, g.segment(co.key, id)); name != "Gold customers" {
		t.Fatalf("name after refused renames: %s", name)
	}
}

func TestSegmentRemoveContacts(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	id := createSegment(t, g, co.key, "VIP", `{"phone":"+393330000001"}`, `{"phone":"+393330000002"}`, `{"phone":"+393330000003"}`)
	path := fmt.Sprintf("/api/segments/%d/contacts", id)
	// The body is checked before the segment: 422 whoever asks (one
	// removal per second per company: each from a company of its own).
	before := g.state()
	wantBody(t, g.do(http.MethodDelete, path, g.fresh().key, []byte(`{"contacts":["1"]}`)), 422,
		`{"detail":[{"type":"string_pattern_mismatch","loc":["body","contacts",0],"msg":"String should match pattern '^\\+?[1-9]\\d{6,14}$'","input":"1","ctx":{"pattern":"^\\+?[1-9]\\d{6,14}$"}}]}`)
	wantBody(t, g.do(http.MethodDelete, path, g.fresh().key, []byte(`{"contacts":"+393330000001"}`)), 422,
		`{"detail":[{"type":"list_type","loc":["body","contacts"],"msg":"Input should be a valid list","input":"+393330000001"}]}`)
	g.unchanged(before, "a 422")

	// Without '+', twice, a non-member: two members leave; the contacts stay.
	r := g.do(http.MethodDelete, path, co.key, []byte(`{"contacts":["393330000001","+393330000001","+393330000002","+14155550100"]}`))
	wantBody(t, r, 200, fmt.Sprintf(`{"segment_id":%d,"removed":2,"contacts":1}`, id))
	if r.header.Get("X-RateLimit-Limit") != "1" {
		t.Fatalf("limit headers %v", r.header)
	}
	if _, err := contacts.NewStore(g.pool, nil).ByPhone(context.Background(), co.company.ID, "+393330000001"); err != nil {
		t.Fatalf("a removed member's contact: %v", err)
	}
	wantBody(t, g.do(http.MethodDelete, path, co.key, []byte(`{"contacts":[]}`)), 429, `{"error":"Rate limit exceeded: 1 per 1 second"}`)
	if _, _, size := segmentJSON(t, g.segment(co.key, id)); size != 1 {
		t.Fatalf("size %d", size)
	}
}

func TestSegmentDelete(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	x := delivery.NewExpander(g.pool, catalog.NewStore(g.pool, box), g.clock.now)
	co := g.fresh()
	id := createSegment(t, g, co.key, "VIP", `{"phone":"+393330000001"}`, `{"phone":"+393330000002"}`)
	path := fmt.Sprintf("/api/segments/%d", id)

	// Two scheduled sends to it, recorded by a dispatcher: the delete is
	// refused, naming them, and changes nothing.
	var waiting []string
	for range 2 {
		r := g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d,"scheduled_at":"2999-01-01T00:00:00Z"}`, co.campaign.ID, id))
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		batchID := r.json(t)["batch_id"].(string)
		g.expandBatch(x, co.company.ID, batchID)
		waiting = append(waiting, batchID)
	}
	before := g.state()
	wantBody(t, g.do(http.MethodDelete, path, co.key, nil), 409,
		fmt.Sprintf(`{"detail":"Segment \"VIP\" is used by 2 scheduled sends: cancel them first","batch_ids":["%s","%s"]}`, waiting[0], waiting[1]))
	g.unchanged(before, "a refused delete")
	for _, b := range waiting {
		if r := g.post("/api/batches/"+b+"/cancel", co.key, ""); r.status != 200 {
			t.Fatalf("cancel %d %s", r.status, r.body)
		}
	}

	// A campaign send accepted before the delete, still in the stream.
	r := g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, id))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	late := r.json(t)["batch_id"].(string)

	r = g.do(http.MethodDelete, path, co.key, nil, "Idempotency-Key", "ignored")
	if r.status != http.StatusNoContent || len(r.body) != 0 || r.header.Get("X-RateLimit-Limit") != "10" {
		t.Fatalf("delete %d %q %v", r.status, r.body, r.header)
	}
	// Gone everywhere: read, rename, add, remove, delete, a campaign send.
	wantDetail(t, g.segment(co.key, id), 404, "Segment not found")
	wantDetail(t, g.do(http.MethodPatch, path, co.key, []byte(`{"name":"Back"}`)), 404, "Segment not found")
	wantDetail(t, g.do(http.MethodDelete, path, co.key, nil), 404, "Segment not found")
	wantDetail(t, g.do(http.MethodDelete, path+"/contacts", co.key, []byte(`{"contacts":["+393330000001"]}`)), 404, "Segment not found")
	wantDetail(t, g.post(path+"/contacts", co.key, `{"contacts":[{"phone":"+393330000001"}]}`), 404, "Segment not found")
	wantDetail(t, g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, id)), 404, "Segment not found")
	wantBody(t, g.do(http.MethodGet, "/api/segments", co.key, nil), 200, `{"segments":[],"next_cursor":null}`)

	// The send accepted before it fails at expansion, naming the segment;
	// the past batches still name it.
	g.expandBatch(x, co.company.ID, late)
	b, err := record.BatchStatus(ctx, g.pool, co.company.ID, late)
	if err != nil || b.Status != record.BatchFailed || b.Error != `segment "VIP" was deleted` || b.SegmentName != "VIP" {
		t.Fatalf("late batch %+v %v", b, err)
	}
	if m := g.do(http.MethodGet, "/api/batches/"+waiting[0], co.key, nil).json(t); m["segment_name"] != "VIP" || m["segment_id"] != float64(id) {
		t.Fatalf("past batch %v", m)
	}
	// The name is free again.
	if again := createSegment(t, g, co.key, "VIP"); again == id {
		t.Fatal("the deleted segment came back")
	}
}

// TestSegmentRateLimits: each new endpoint's limit, per company, with the
// limit headers (routes.go).
func TestSegmentRateLimits(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co, other := g.fresh(), g.fresh()
	for _, tc := range []struct {
		method, path string
		n            int
		body         string
		error        string
	}{
		{http.MethodGet, "/api/segments", 20, "", `{"error":"Rate limit exceeded: 20 per 1 second"}`},
		{http.MethodGet, "/api/segments/1", 20, "", `{"error":"Rate limit exceeded: 20 per 1 second"}`},
		{http.MethodPatch, "/api/segments/1", 10, `{"name":"x"}`, `{"error":"Rate limit exceeded: 10 per 1 second"}`},
		{http.MethodDelete, "/api/segments/1", 10, "", `{"error":"Rate limit exceeded: 10 per 1 second"}`},
		{http.MethodDelete, "/api/segments/1/contacts", 1, `{"contacts":[]}`, `{"error":"Rate limit exceeded: 1 per 1 second"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := untilRefused(t, tc.n, time.Second, func() response { return g.do(tc.method, tc.path, co.key, body) })
			if string(r.body) != tc.error {
				t.Fatalf("over the limit: %d %s", r.status, r.body)
			}
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
			if r := g.do(tc.method, tc.path, other.key, body); r.status == 429 {
				t.Fatal("another company was limited")
			}
		})
	}
}
