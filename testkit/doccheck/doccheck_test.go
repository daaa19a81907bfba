// Package doccheck holds the repository's documentation to what a newcomer
// needs from it: a README short enough to read, and links that lead
// somewhere.
package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's folder.
const root = "../.."

// maxReadmeLines bounds README.md: what Parley is, the two commands, the
// services, the code map and the API quick start; the rest is in docs/.
const maxReadmeLines = 400

// documents are the pages whose relative links are checked: the README and
// every page of docs/.
func documents(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("docs/ has no page")
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...)
}

func TestReadmeIsShort(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > maxReadmeLines {
		t.Fatalf("README.md has %d lines, more than %d: move the detail to a page of docs/", n, maxReadmeLines)
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range documents(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, l := range links(string(raw)) {
			if err := resolve(page, l); err != "" {
				t.Errorf("%s: link (%s): %s", name, l, err)
			}
		}
	}
}

// TestChecksFail: the checks find a missing file, a missing anchor and a
// link inside code is no link.
func TestChecksFail(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	doc := "# Title\n\n## Opt-out: STOP, START and `131050`\n\nSee [a](#opt-out-stop-start-and-131050), [b](other.md), [c](#nowhere), " +
		"[d](page.md#title), [e](https://example.com/x), `[f](inline.md)`.\n\n```go\nx := m[\"k\"](y)\n```\n"
	if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range links(doc) {
		got[l] = resolve(page, l)
	}
	want := map[string]bool{"#opt-out-stop-start-and-131050": true, "other.md": false, "#nowhere": false, "page.md#title": true}
	if len(got) != len(want) {
		t.Fatalf("links %q, want those of %v", got, want)
	}
	for l, ok := range want {
		if (got[l] == "") != ok {
			t.Errorf("link %s: %q, want resolved %v", l, got[l], ok)
		}
	}
}

var (
	linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	spanRe = regexp.MustCompile("`[^`]*`")
)

// links are the relative link targets of a Markdown document, outside code
// blocks and code spans.
func links(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = spanRe.ReplaceAllString(line, "")
		for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, target)
		}
	}
	return out
}

// resolve checks one link of page: its file (or folder) exists and, for a
// Markdown page, so does its anchor. It returns what is wrong, or "".
func resolve(page, link string) string {
	path, anchor, _ := strings.Cut(link, "#")
	target := page
	if path != "" {
		target = filepath.Join(filepath.Dir(page), path)
		if _, err := os.Stat(target); err != nil {
			return "no such file or folder"
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	raw, err := os.ReadFile(target)
	if err != nil {
		return err.Error()
	}
	for _, a := range anchors(string(raw)) {
		if a == anchor {
			return ""
		}
	}
	return "no heading has the anchor #" + anchor
}

// anchors are the ids GitHub gives a document's headings: lower case,
// punctuation dropped, spaces as hyphens, and -1, -2, ... after a repeat.
func anchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out = append(out, id+"-"+strconv.Itoa(n))
		} else {
			out = append(out, id)
		}
		seen[id]++
	}
	return out
}
