package record

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// writesRecord matches SQL that writes the messages or batches table:
// INSERT INTO, UPDATE, DELETE FROM, MERGE INTO, COPY and TRUNCATE, in any
// case and across line breaks.
var writesRecord = regexp.MustCompile(`(?is)\b(insert\s+into|update|delete\s+from|merge\s+into|copy|truncate(\s+table)?)\s+(only\s+)?(public\.)?"?(messages|batches)"?\b`)

// recordWriters lists the non-test Go files below root, outside this
// package, whose text writes the messages or batches table.
func recordWriters(t *testing.T, root, self string) (found []string, files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "testdata":
				return filepath.SkipDir
			}
			if abs, _ := filepath.Abs(path); abs == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, loc := range writesRecord.FindAllIndex(src, -1) {
			line := 1 + strings.Count(string(src[:loc[0]]), "\n")
			found = append(found, path+":"+strconv.Itoa(line)+": "+strings.Join(strings.Fields(string(src[loc[0]:loc[1]])), " "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// TestOnlyRecordWritesMessagesAndBatches: this package is the one owner of
// the messages and batches tables. Every non-test Go file of the
// repository (every module: pkg, services, testkit) is read, and SQL that
// writes either table anywhere else fails, naming the file and line. Tests
// may write fixtures (a message put in a state directly; the naive
// dispatcher a benchmark measures against).
func TestOnlyRecordWritesMessagesAndBatches(t *testing.T) {
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	found, files := recordWriters(t, "../..", self)
	if files < 100 {
		t.Fatalf("read %d Go files: the walk did not find the repository", files)
	}
	for _, f := range found {
		t.Errorf("%s: only pkg/record writes the messages and batches tables; call it", f)
	}
}

// TestRecordWritersAreFound keeps the guard honest: each kind of write,
// spelled as code spells it, is found, and reads are not.
func TestRecordWritersAreFound(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nconst (\n" +
		"\ta = `INSERT INTO messages (id) VALUES (1)`\n" +
		"\tb = `\n\t\tupdate batches\n\t\tSET status = 'failed'`\n" +
		"\tc = `DELETE FROM messages WHERE id = 1`\n" +
		"\td = `COPY messages (id) FROM STDIN`\n" +
		"\te = `SELECT count(*) FROM messages`\n" +
		"\tf = `UPDATE message_templates SET x = 1`\n" +
		"\tg = `TRUNCATE batches`\n" +
		")\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, _ := recordWriters(t, dir, "")
	want := []string{"INSERT INTO messages", "update batches", "DELETE FROM messages", "COPY messages", "TRUNCATE batches"}
	if len(found) != len(want) {
		t.Fatalf("found %q, want the %d writes %q", found, len(want), want)
	}
	for i, w := range want {
		if !strings.HasSuffix(found[i], w) {
			t.Errorf("finding %d = %q, want it to end with %q", i, found[i], w)
		}
	}
}
