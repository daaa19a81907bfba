package csvexport_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/csvexport"
)

func write(t *testing.T, o csvexport.Options, records ...[]string) string {
	t.Helper()
	var buf bytes.Buffer
	w := csvexport.NewWriter(&buf, o)
	for _, r := range records {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestQuoting: RFC 4180 on the wire (CRLF after every record, a field
// quoted when it holds a comma, a quote or a line break, quotes doubled),
// UTF-8 as is, and encoding/csv reads every value back.
func TestQuoting(t *testing.T) {
	cases := []struct {
		name, cell, wire string
	}{
		{"plain", "delivered", "delivered"},
		{"empty", "", ""},
		{"comma", "Spring sale, part 2", `"Spring sale, part 2"`},
		{"quotes", `The "best" offer`, `"The ""best"" offer"`},
		{"line feed", "line one\nline two", "\"line one\r\nline two\""},
		{"carriage return and line feed", "a\r\nb", "\"a\r\nb\""},
		{"unicode", "Soldes d'été – 夏のセール 🎉", "Soldes d'été – 夏のセール 🎉"},
		{"leading space", " padded", `" padded"`},
		{"quote inside only", `12" screen`, `"12"" screen"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := write(t, csvexport.Options{}, []string{"id", c.cell, "end"})
			want := "id," + c.wire + ",end\r\n"
			if got != want {
				t.Fatalf("wrote %q, want %q", got, want)
			}
			back, err := csv.NewReader(strings.NewReader(got)).Read()
			if err != nil {
				t.Fatal(err)
			}
			// encoding/csv reads CRLF inside a quoted field as LF.
			if wantBack := strings.ReplaceAll(c.cell, "\r\n", "\n"); len(back) != 3 || back[1] != wantBack {
				t.Fatalf("read back %q, want %q", back, wantBack)
			}
		})
	}
}

// TestNeutralise: a cell a spreadsheet would evaluate gets a leading
// quote, whatever follows; anything else is left alone, a quote already
// there included.
func TestNeutralise(t *testing.T) {
	cases := map[string]string{
		"=1+2":                    "'=1+2",
		`=HYPERLINK("http://x")`:  `'=HYPERLINK("http://x")`,
		"+14155550100":            "'+14155550100",
		"-2+3":                    "'-2+3",
		"@SUM(A1:A2)":             "'@SUM(A1:A2)",
		"\t=1+2":                  "'\t=1+2",
		"\r=1+2":                  "'\r=1+2",
		"+":                       "'+",
		"":                        "",
		"131026":                  "131026",
		"Message undeliverable":   "Message undeliverable",
		"a=b":                     "a=b",
		" =1":                     " =1",
		"'=1":                     "'=1",
		"2026-11-28T09:15:30Z":    "2026-11-28T09:15:30Z",
		"０=1":                     "０=1",
		"\n=1":                    "\n=1",
		"true":                    "true",
		"0193a5c4-7f1e-7cc2-9d5e": "0193a5c4-7f1e-7cc2-9d5e",
	}
	for in, want := range cases {
		if got := csvexport.Neutralise(in); got != want {
			t.Errorf("Neutralise(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWriterNeutralisesAndQuotes: the writer neutralises each cell before
// quoting it, so a formula hidden behind a comma or a quote stays text,
// and the record read back is the neutralised one.
func TestWriterNeutralisesAndQuotes(t *testing.T) {
	got := write(t, csvexport.Options{}, []string{"phone", "title"},
		[]string{"+393331234567", `=cmd|' /C calc'!A0`}, []string{"", `-1,"x"`})
	want := "phone,title\r\n'+393331234567,'=cmd|' /C calc'!A0\r\n,\"'-1,\"\"x\"\"\"\r\n"
	if got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	all, err := csv.NewReader(strings.NewReader(got)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if all[1][0] != "'+393331234567" || all[1][1] != `'=cmd|' /C calc'!A0` || all[2][0] != "" || all[2][1] != `'-1,"x"` {
		t.Fatalf("read back %q", all)
	}
}

// TestBOM: with Options.BOM the mark comes once, before the header; by
// default there is none.
func TestBOM(t *testing.T) {
	got := write(t, csvexport.Options{BOM: true}, []string{"a", "b"}, []string{"1", "2"})
	if got != "\ufeffa,b\r\n1,2\r\n" {
		t.Fatalf("with a BOM: %q", got)
	}
	if got := write(t, csvexport.Options{}, []string{"a"}); got != "a\r\n" {
		t.Fatalf("without: %q", got)
	}
	if got := write(t, csvexport.Options{BOM: true}); got != "" {
		t.Fatalf("nothing written, yet %q", got)
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

// TestWriteErrorsSurface: an error of the writer underneath comes back
// from Flush (or Write), never lost.
func TestWriteErrorsSurface(t *testing.T) {
	w := csvexport.NewWriter(&failingWriter{}, csvexport.Options{})
	if err := w.Write([]string{"a"}); err != nil {
		t.Fatalf("buffered write: %v", err)
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("flush: %v", err)
	}
	bw := csvexport.NewWriter(&failingWriter{}, csvexport.Options{BOM: true})
	if err := bw.Write([]string{"a"}); err == nil {
		t.Fatal("the byte order mark's write error was lost")
	}
}
