package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes aligned columns; an empty list prints a short note instead.
func table(w io.Writer, empty string, header []string, rows [][]string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, empty)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// fields writes one record as "label: value" lines.
func fields(w io.Writer, pairs ...string) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	_ = tw.Flush()
}

const timeLayout = "2006-01-02 15:04:05Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fmtID(id int64) string { return strconv.FormatInt(id, 10) }

func fmtIDPtr(id *int64) string {
	if id == nil {
		return "-"
	}
	return fmtID(*id)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
