package console

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/admin/internal/batches"
)

func TestProgressBar(t *testing.T) {
	svg := string(progressBar(batches.Batch{Counts: map[string]int{"delivered": 3, "failed": 1}}))
	re := regexp.MustCompile(`<rect class="seg seg-([a-z_]+)" x="([0-9.]+)" width="([0-9.]+)"`)
	segs := re.FindAllStringSubmatch(svg, -1)
	if len(segs) != 2 || segs[0][1] != "delivered" || segs[1][1] != "failed" {
		t.Fatalf("segments %v", segs)
	}
	w0, _ := strconv.ParseFloat(segs[0][3], 64)
	x1, _ := strconv.ParseFloat(segs[1][2], 64)
	w1, _ := strconv.ParseFloat(segs[1][3], 64)
	if w0 != 150 || x1 != 150 || w1 != 50 {
		t.Fatalf("widths %v, %v at %v: want 150 and 50 of 200", w0, w1, x1)
	}
	if !strings.Contains(svg, `aria-label="Delivered 3, Failed 1"`) || strings.Contains(svg, "style=") {
		t.Fatalf("bar %s", svg)
	}
	if empty := string(progressBar(batches.Batch{})); strings.Contains(empty, "seg") || !strings.Contains(empty, "No messages yet") {
		t.Fatalf("empty bar %s", empty)
	}
}

func TestTimelineChart(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	tl := batches.Timeline{Start: t0, End: t0.Add(2 * time.Minute),
		At:     []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)},
		Counts: []map[string]int{{"waiting": 4}, {"waiting": 2, "sent": 2}, {"delivered": 3, "failed": 1}}}
	svg := string(timelineChart(tl))
	for _, want := range []string{`class="area area-waiting"`, `class="area area-sent"`, `class="area area-delivered"`, `class="area area-failed"`,
		"at the end: Delivered 3, Failed 1", ">09:00:00<", ">09:01:00<", ">09:02:00<", ">4<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "area-read") || strings.Contains(svg, "<script") || strings.Contains(svg, "style=") {
		t.Error("chart draws an empty state, or has a script or a style attribute")
	}
	// The delivered area is the bottom layer: at the end it spans 0 to 3 of 4.
	m := regexp.MustCompile(`class="area area-delivered" points="([^"]+)"`).FindStringSubmatch(svg)
	if m == nil || !strings.Contains(m[1], "708.0,67.0") { // x = 52+656, y = 12 + 220 - 220*3/4
		t.Errorf("delivered area points %v", m)
	}
	if empty := string(timelineChart(batches.Timeline{})); !strings.Contains(empty, "No messages yet") || strings.Contains(empty, "polygon") {
		t.Errorf("empty chart %s", empty)
	}
}

func TestNiceCeil(t *testing.T) {
	for n, want := range map[int64]int64{1: 1, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 199: 200, 201: 500, 999: 1000, 1_000_001: 2_000_000} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestReportChart(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	series := []record.ReportPoint{
		{Start: t0, Counts: record.Counts{Sent: 8, Delivered: 6, Read: 2, Failed: 1}},
		{Start: t0.AddDate(0, 0, 1), Counts: record.Counts{Sent: 2, Delivered: 3, Replied: 1}},
		{Start: t0.AddDate(0, 0, 2)},
	}
	svg := string(reportChart(series, record.IntervalDay))
	for _, want := range []string{`class="line line-sent"`, `class="line line-delivered"`, `class="line line-read"`, `class="line line-replied"`,
		`class="line line-failed"`, "Messages by day from 1 Jun 2025 to 3 Jun 2025: Sent 10, Delivered 9, Read 2, Replied 1, Failed 1",
		">1 Jun 2025<", ">2 Jun 2025<", ">3 Jun 2025<", ">10<", ">5<", "<title>2 Jun 2025: Replied 1</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "<script") || strings.Contains(svg, "style=") {
		t.Error("the chart has a script or a style attribute")
	}
	// Sent: 8 of an axis of 10 at the middle of the first of three steps.
	m := regexp.MustCompile(`class="line line-sent" points="([^"]+)"`).FindStringSubmatch(svg)
	if m == nil || !strings.HasPrefix(m[1], "160.7,56.0 ") { // x = 52 + 652/6, y = 12 + 220 - 220*8/10
		t.Errorf("sent line points %v", m)
	}
	hours := make([]record.ReportPoint, 200)
	for i := range hours {
		hours[i] = record.ReportPoint{Start: t0.Add(time.Duration(i) * time.Hour), Counts: record.Counts{Sent: 1}}
	}
	if many := string(reportChart(hours, record.IntervalHour)); strings.Contains(many, "<circle") || !strings.Contains(many, ">1 Jun 00:00<") {
		t.Error("a chart of 200 hours marks each point, or lacks its hour labels")
	}
	if empty := string(reportChart(series[2:], record.IntervalDay)); !strings.Contains(empty, "No messages in this range") || strings.Contains(empty, "polyline") {
		t.Errorf("empty chart %s", empty)
	}
}
