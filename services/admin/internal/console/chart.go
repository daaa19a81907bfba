package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/admin/internal/batches"
)

// The console draws its charts on the server as inline SVG: no script, no
// library, no style attribute (the Content-Security-Policy has no
// 'unsafe-inline'), only SVG presentation attributes.

// stateStyle is how a message state is named and coloured.
type stateStyle struct {
	Label, Color string
}

var stateStyles = map[string]stateStyle{
	"accepted":        {"Accepted", "#98a2b3"},
	"queued":          {"Queued", "#98a2b3"},
	"scheduled":       {"Scheduled", "#b9c0cb"},
	"deferred":        {"Deferred", "#cfd4dc"},
	"held":            {"Held", "#fdb022"},
	"waiting":         {"Waiting", "#98a2b3"},
	"sending":         {"Sending", "#53b1fd"},
	"sent":            {"Sent", "#2e90fa"},
	"delivered":       {"Delivered", "#12b76a"},
	"read":            {"Read", "#067647"},
	"replied":         {"Replied", "#7a5af8"},
	"failed":          {"Failed", "#d92d20"},
	"skipped_opt_out": {"Skipped (opted out)", "#f79009"},
	"cancelled":       {"Cancelled", "#475467"},
}

func styleOf(state string) stateStyle {
	if s, ok := stateStyles[state]; ok {
		return s
	}
	return stateStyle{state, "#667085"}
}

// barOrder is the order of a progress bar's segments: done first.
var barOrder = []string{"read", "delivered", "sent", "sending", "queued", "scheduled", "deferred", "held", "failed", "skipped_opt_out", "cancelled"}

// progressBar draws a batch's messages by state as one horizontal bar, with
// the same counts said in its title for screen readers and tooltips.
func progressBar(b batches.Batch) template.HTML {
	const w, h = 200.0, 10.0
	total := 0
	for _, n := range b.Counts {
		total += n
	}
	var sb strings.Builder
	var parts []string
	for _, st := range barOrder {
		if n := b.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", styleOf(st).Label, n))
		}
	}
	title := "No messages yet"
	if len(parts) > 0 {
		title = strings.Join(parts, ", ")
	}
	fmt.Fprintf(&sb, `<svg class="progress" viewBox="0 0 %g %g" width="%g" height="%g" preserveAspectRatio="none" role="img" aria-label="%s"><title>%s</title>`,
		w, h, w, h, template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	fmt.Fprintf(&sb, `<rect width="%g" height="%g" rx="3" fill="#eaecf0"/>`, w, h)
	if total > 0 {
		x := 0.0
		for _, st := range barOrder {
			n := b.Counts[st]
			if n == 0 {
				continue
			}
			sw := w * float64(n) / float64(total)
			fmt.Fprintf(&sb, `<rect class="seg seg-%s" x="%.2f" width="%.2f" height="%g" fill="%s"/>`, st, x, sw, h, styleOf(st).Color)
			x += sw
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}

// timelineChart draws a batch's states over time as stacked areas: at each
// moment, how many messages were in each state.
func timelineChart(tl batches.Timeline) template.HTML {
	const (
		width, height         = 720.0, 260.0
		left, right, top, bot = 52.0, 12.0, 12.0, 28.0
	)
	pw, ph := width-left-right, height-top-bot
	max := 0
	for _, c := range tl.Counts {
		n := 0
		for _, v := range c {
			n += v
		}
		if n > max {
			max = n
		}
	}
	var sb strings.Builder
	summary := "No messages yet"
	if len(tl.Counts) > 0 && max > 0 {
		var parts []string
		lastCounts := tl.Counts[len(tl.Counts)-1]
		for _, st := range batches.TimelineStates {
			if n := lastCounts[st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", styleOf(st).Label, n))
			}
		}
		summary = fmt.Sprintf("Messages by state from %s to %s; at the end: %s", formatTime(tl.Start), formatTime(tl.End), strings.Join(parts, ", "))
	}
	fmt.Fprintf(&sb, `<svg class="timeline" id="timeline" viewBox="0 0 %g %g" width="100%%" role="img" aria-label="%s">`,
		width, height, template.HTMLEscapeString(summary))
	fmt.Fprintf(&sb, `<title>%s</title>`, template.HTMLEscapeString(summary))
	if max == 0 || len(tl.At) < 2 {
		fmt.Fprintf(&sb, `<text x="%g" y="%g" text-anchor="middle" fill="#667085" font-size="14">No messages yet</text></svg>`, width/2, height/2)
		return template.HTML(sb.String())
	}
	n := len(tl.At)
	xOf := func(i int) float64 {
		span := tl.End.Sub(tl.Start)
		return left + pw*float64(tl.At[i].Sub(tl.Start))/float64(span)
	}
	yOf := func(v int) float64 { return top + ph - ph*float64(v)/float64(max) }

	// Grid and y axis: 0, half, max.
	for _, v := range []int{0, max / 2, max} {
		y := yOf(v)
		fmt.Fprintf(&sb, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#eaecf0"/>`, left, left+pw, y, y)
		fmt.Fprintf(&sb, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#667085" font-size="11">%d</text>`, left-6, y, v)
	}
	// Stacked areas, bottom to top in the order of TimelineStates reversed
	// so that what is done sits at the bottom.
	order := []string{"read", "delivered", "sent", "failed", "skipped_opt_out", "cancelled", "waiting"}
	base := make([]int, n)
	for _, st := range order {
		topv := make([]int, n)
		any := false
		for i := range n {
			topv[i] = base[i] + tl.Counts[i][st]
			if tl.Counts[i][st] > 0 {
				any = true
			}
		}
		if any {
			var pts []string
			for i := range n {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(topv[i])))
			}
			for i := n - 1; i >= 0; i-- {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(base[i])))
			}
			fmt.Fprintf(&sb, `<polygon class="area area-%s" points="%s" fill="%s" fill-opacity="0.85"><title>%s</title></polygon>`,
				st, strings.Join(pts, " "), styleOf(st).Color, template.HTMLEscapeString(styleOf(st).Label))
		}
		base = topv
	}
	// X axis: the first, middle and last moments.
	fmt.Fprintf(&sb, `<line x1="%g" x2="%g" y1="%g" y2="%g" stroke="#98a2b3"/>`, left, left+pw, top+ph, top+ph)
	layout := "15:04:05"
	if tl.End.Sub(tl.Start) > 20*time.Hour {
		layout = "2 Jan 15:04"
	}
	for j, i := range []int{0, (n - 1) / 2, n - 1} {
		anchor := []string{"start", "middle", "end"}[j]
		fmt.Fprintf(&sb, `<text x="%.1f" y="%g" text-anchor="%s" fill="#667085" font-size="11">%s</text>`,
			xOf(i), height-8, anchor, tl.At[i].UTC().Format(layout))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}

// reportLine is one line of a report's chart: a metric of its series.
type reportLine struct {
	Key   string
	Value func(record.Counts) int64
}

// reportLines are the lines of a report's chart, in the legend's order.
var reportLines = []reportLine{
	{"sent", func(c record.Counts) int64 { return c.Sent }},
	{"delivered", func(c record.Counts) int64 { return c.Delivered }},
	{"read", func(c record.Counts) int64 { return c.Read }},
	{"replied", func(c record.Counts) int64 { return c.Replied }},
	{"failed", func(c record.Counts) int64 { return c.Failed }},
}

// reportDots is the most steps a report's chart marks each point of: more
// would crowd the lines.
const reportDots = 48

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above n
// (n > 0): the top of a chart's axis.
func niceCeil(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

// stepLabel writes a report step's start as its axis and tooltips do.
func stepLabel(t time.Time, interval string) string {
	if interval == record.IntervalHour {
		return t.UTC().Format("2 Jan 15:04")
	}
	return t.UTC().Format("2 Jan 2006")
}

// reportChart draws a report's series as one line per metric (sent,
// delivered, read, replied, failed): how many messages reached each state
// in each step. Each step is a point at the middle of its width.
func reportChart(series []record.ReportPoint, interval string) template.HTML {
	const (
		width, height         = 720.0, 260.0
		left, right, top, bot = 52.0, 16.0, 12.0, 28.0
	)
	pw, ph := width-left-right, height-top-bot
	var max int64
	totals := make([]int64, len(reportLines))
	for _, p := range series {
		for j, l := range reportLines {
			v := l.Value(p.Counts)
			totals[j] += v
			if v > max {
				max = v
			}
		}
	}
	var sb strings.Builder
	summary := "No messages in this range"
	n := len(series)
	if n > 0 {
		var parts []string
		for j, l := range reportLines {
			parts = append(parts, fmt.Sprintf("%s %d", styleOf(l.Key).Label, totals[j]))
		}
		summary = fmt.Sprintf("Messages by %s from %s to %s: %s", interval, stepLabel(series[0].Start, interval),
			stepLabel(series[n-1].Start, interval), strings.Join(parts, ", "))
	}
	fmt.Fprintf(&sb, `<svg class="report-chart" id="report-chart" viewBox="0 0 %g %g" width="100%%" role="img" aria-label="%s">`,
		width, height, template.HTMLEscapeString(summary))
	fmt.Fprintf(&sb, `<title>%s</title>`, template.HTMLEscapeString(summary))
	if max == 0 {
		fmt.Fprintf(&sb, `<text x="%g" y="%g" text-anchor="middle" fill="#667085" font-size="14">No messages in this range</text></svg>`, width/2, height/2)
		return template.HTML(sb.String())
	}
	axis := niceCeil(max)
	xOf := func(i int) float64 { return left + pw*(float64(i)+0.5)/float64(n) }
	yOf := func(v int64) float64 { return top + ph - ph*float64(v)/float64(axis) }
	ticks := []int64{0, axis}
	if axis%2 == 0 {
		ticks = []int64{0, axis / 2, axis}
	}
	for _, v := range ticks {
		y := yOf(v)
		fmt.Fprintf(&sb, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#eaecf0"/>`, left, left+pw, y, y)
		fmt.Fprintf(&sb, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#667085" font-size="11">%d</text>`, left-6, y, v)
	}
	for _, l := range reportLines {
		st := styleOf(l.Key)
		pts := make([]string, n)
		for i, p := range series {
			pts[i] = fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(l.Value(p.Counts)))
		}
		fmt.Fprintf(&sb, `<polyline class="line line-%s" points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"><title>%s</title></polyline>`,
			l.Key, strings.Join(pts, " "), st.Color, template.HTMLEscapeString(st.Label))
		if n > reportDots {
			continue
		}
		for i, p := range series {
			v := l.Value(p.Counts)
			fmt.Fprintf(&sb, `<circle class="dot dot-%s" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s: %s %d</title></circle>`,
				l.Key, xOf(i), yOf(v), st.Color, template.HTMLEscapeString(stepLabel(p.Start, interval)), template.HTMLEscapeString(st.Label), v)
		}
	}
	fmt.Fprintf(&sb, `<line x1="%g" x2="%g" y1="%g" y2="%g" stroke="#98a2b3"/>`, left, left+pw, top+ph, top+ph)
	labels := []int{0, (n - 1) / 2, n - 1}
	anchors := []string{"start", "middle", "end"}
	if n < 3 {
		labels, anchors = []int{0, n - 1}, []string{"middle", "middle"}
	}
	for j, i := range labels {
		if j > 0 && i == labels[j-1] {
			continue
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%g" text-anchor="%s" fill="#667085" font-size="11">%s</text>`,
			xOf(i), height-8, anchors[j], template.HTMLEscapeString(stepLabel(series[i].Start, interval)))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}
