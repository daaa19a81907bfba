package cli

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/record"
)

// exportRows parses an export: the header row, then the rows.
func exportRows(t *testing.T, out string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) == 0 || !slices.Equal(rows[0], record.ExportColumns) {
		t.Fatalf("not an export (%v):\n%s", err, out)
	}
	if !strings.HasSuffix(out, "\r\n") {
		t.Fatal("lines do not end with CRLF")
	}
	return rows[1:]
}

// TestExport writes a batch's, a campaign's, an automation's and all of a
// company's messages, to stdout and to files, as the API writes them.
func TestExport(t *testing.T) {
	s := newStack(t)
	f := s.seedBatches()

	rows := exportRows(t, s.ok("export", "batch", f.completed, "--company", "acme").stdout)
	var states []string
	for i, r := range rows {
		if r[1] != f.completed || r[2] != "campaign" || r[3] != "Spring sale" || r[7] != fmt.Sprintf("'+3361234%04d", i) {
			t.Fatalf("row %d: %q", i, r)
		}
		states = append(states, r[8])
	}
	if !slices.Equal(states, []string{"delivered", "failed", "read"}) || rows[1][9] != "131026" || rows[1][10] != "Message undeliverable" {
		t.Fatalf("rows %q", rows)
	}
	// Still in the stream: no message yet, the header alone.
	if got := exportRows(t, s.ok("export", "batch", f.pending, "--company", "acme").stdout); len(got) != 0 {
		t.Fatalf("a batch in the stream: %q", got)
	}
	if got := exportRows(t, s.ok("export", "campaign", fmt.Sprint(f.campaign), "--company", "acme", "--from", "24h").stdout); !slices.EqualFunc(got, rows, slices.Equal) {
		t.Fatalf("the campaign: %q", got)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "auto.csv")
	var v exportView
	s.jsonOK(&v, "export", "automation", fmt.Sprint(f.automation), "--company", "acme", "-o", path)
	if v.File != path || v.Rows != 3 {
		t.Fatalf("--json: %+v", v)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := exportRows(t, string(raw)); len(got) != 3 || got[0][4] != "Order shipped" || got[1][8] != "queued" {
		t.Fatalf("the automation's file: %q", got)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode: %v, %v", st.Mode(), err)
	}

	all := filepath.Join(dir, "all.csv")
	if out := s.ok("export", "messages", "--company", "acme", "--bom", "--output", all).stdout; out != "wrote 6 messages to "+all+"\n" {
		t.Fatalf("stdout %q", out)
	}
	raw, err = os.ReadFile(all)
	if err != nil {
		t.Fatal(err)
	}
	body, bom := strings.CutPrefix(string(raw), "\ufeff")
	if got := exportRows(t, body); !bom || len(got) != 6 {
		t.Fatalf("all messages (BOM %v): %q", bom, got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if got := exportRows(t, s.ok("export", "messages", "--company", "globex").stdout); len(got) != 1 || got[0][1] != f.foreign {
		t.Fatalf("globex: %q", got)
	}

	s.fails(ExitFailure, fmt.Sprintf("batch %s not found in company \"acme\"", f.foreign), "export", "batch", f.foreign, "--company", "acme")
	s.fails(ExitFailure, "campaign 999 not found", "export", "campaign", "999", "--company", "acme")
	s.fails(ExitFailure, fmt.Sprintf("automation %d not found in company \"globex\"", f.automation), "export", "automation",
		fmt.Sprint(f.automation), "--company", "globex", "-o", filepath.Join(dir, "never.csv"))
	if _, err := os.Stat(filepath.Join(dir, "never.csv")); !os.IsNotExist(err) {
		t.Fatalf("a failed export left its file: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "messages", "--company", "acme", "--from", "2026-02-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"}, "--from: from must be before to"},
		{[]string{"export", "messages", "--company", "acme", "--from", "9000h"}, "--from: the range is longer than 366 days"},
		{[]string{"export", "messages", "--company", "acme", "--to", "soon"}, `--to "soon"`},
		{[]string{"export", "campaign", "x", "--company", "acme"}, `campaign id "x"`},
		{[]string{"export", "batch", "--company", "acme"}, "takes one batch id"},
		{[]string{"export", "messages"}, `required flag(s) "company" not set`},
		{[]string{"export", "messages", "--company", "acme", "--json"}, "needs --output"},
	} {
		s.fails(ExitUsage, tc.want, tc.args...)
	}
}
