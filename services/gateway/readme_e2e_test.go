package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// docSection returns the lines of a Markdown document from its heading line
// (such as "## API quick start") to the next heading of the same or a
// higher level outside a code block; with heading empty, the whole
// document.
func docSection(t *testing.T, name, doc, heading string) string {
	t.Helper()
	if heading == "" {
		return doc
	}
	lines := strings.SplitAfter(doc, "\n")
	level := strings.IndexByte(heading, ' ')
	start := slices.Index(lines, heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no %s section", name, heading)
	}
	fenced := false
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if n := len(l) - len(strings.TrimLeft(l, "#")); !fenced && n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[start:i], "")
		}
	}
	return strings.Join(lines[start:], "")
}

// docCommand is a documented curl and the answer the document shows for
// it, if any: the comment right after the command, "# <status> <JSON>",
// whose JSON may continue on the next comment lines, or "# <status>
// <text>" for an answer that is not JSON (a CSV file): its first line.
type docCommand struct {
	cmd    string
	status string // "" when the document shows no answer
	body   string // the answer's JSON or first line, "" when only the status is shown
}

// isJSONAnswer tells a documented JSON answer from the first line of a
// text one.
func isJSONAnswer(body string) bool {
	return strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[")
}

var answerLine = regexp.MustCompile(`^#\s+([1-5]\d\d)\b\s*(.*)$`)

// docCommands returns the shell commands of the ```sh blocks of section
// that call curl, each as one logical line (backslash continuations and
// quotes that span lines joined), in order, with their documented answers.
func docCommands(section string) []docCommand {
	var cmds []docCommand
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		var cur strings.Builder
		var quote rune
		var last *docCommand // the command whose answer may follow
		collecting := false  // its answer's JSON continues on the next line
		for _, line := range strings.SplitAfter(block[1], "\n") {
			trimmed := strings.TrimSpace(line)
			if quote == 0 && cur.Len() == 0 && strings.HasPrefix(trimmed, "#") {
				switch m := answerLine.FindStringSubmatch(trimmed); {
				case collecting:
					last.body += " " + strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
					collecting = !json.Valid([]byte(last.body))
				case last != nil && last.status == "" && m != nil:
					last.status, last.body = m[1], m[2]
					collecting = isJSONAnswer(last.body) && !json.Valid([]byte(last.body))
				default:
					last = nil
				}
				continue
			}
			last, collecting = nil, false
			for _, r := range line {
				switch {
				case quote == 0 && (r == '\'' || r == '"'):
					quote = r
				case quote == r:
					quote = 0
				}
			}
			body := strings.TrimRight(line, "\n")
			if quote == 0 && strings.HasSuffix(body, "\\") {
				cur.WriteString(strings.TrimSuffix(body, "\\"))
				continue
			}
			cur.WriteString(line)
			if quote != 0 {
				continue
			}
			cmd := strings.TrimSpace(cur.String())
			cur.Reset()
			if strings.HasPrefix(cmd, "curl ") {
				cmds = append(cmds, docCommand{cmd: cmd})
				last = &cmds[len(cmds)-1]
			}
		}
	}
	return cmds
}

// maybeAbsent are the keys of an answer present only in some states (a
// batch's completed_at, a waiting message's due, the names of what a
// recorded batch sends): an example may show them or not.
var maybeAbsent = map[string]bool{"scheduled_at": true, "completed_at": true, "cancelled_at": true, "error": true,
	"due": true, "campaign_id": true, "campaign_name": true, "automation_id": true, "automation_name": true,
	"segment_id": true, "segment_name": true, "pricing": true}

// shapeDiff compares a documented answer with a real one by shape: the
// same keys at every level (but those of maybeAbsent; a message's times,
// which depend on its state, are not compared key by key), and values of
// the same JSON kind (null stands for any). Values themselves (ids, times,
// counts) are not compared.
func shapeDiff(path string, doc, real any) []string {
	kind := func(v any) string {
		switch v.(type) {
		case nil:
			return "null"
		case map[string]any:
			return "object"
		case []any:
			return "array"
		case string:
			return "string"
		case float64:
			return "number"
		case bool:
			return "boolean"
		}
		return fmt.Sprintf("%T", v)
	}
	if doc == nil || real == nil {
		return nil
	}
	if kind(doc) != kind(real) {
		return []string{fmt.Sprintf("%s: documented as %s, answered %s", path, kind(doc), kind(real))}
	}
	var diffs []string
	switch d := doc.(type) {
	case map[string]any:
		r := real.(map[string]any)
		times := strings.HasSuffix(path, ".times")
		for k, v := range d {
			rv, ok := r[k]
			if !ok {
				if !maybeAbsent[k] && !times {
					diffs = append(diffs, fmt.Sprintf("%s.%s: documented, not in the answer", path, k))
				}
				continue
			}
			diffs = append(diffs, shapeDiff(path+"."+k, v, rv)...)
		}
		for k := range r {
			if _, ok := d[k]; !ok && !times && !maybeAbsent[k] {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in the answer, not documented", path, k))
			}
		}
	case []any:
		r := real.([]any)
		for i := range min(len(d), len(r)) {
			diffs = append(diffs, shapeDiff(fmt.Sprintf("%s[%d]", path, i), d[i], r[i])...)
		}
	}
	return diffs
}

// checkAnswer holds a real answer to the one documented for its command.
func checkAnswer(c docCommand, status, body string) []string {
	if c.status == "" {
		return nil
	}
	if c.status != status {
		return []string{fmt.Sprintf("documented %s, answered %s", c.status, status)}
	}
	if c.body == "" {
		return nil
	}
	if !isJSONAnswer(c.body) {
		first, _, _ := strings.Cut(body, "\n")
		if first = strings.TrimRight(first, "\r"); first != c.body {
			return []string{fmt.Sprintf("first line %q, documented %q", first, c.body)}
		}
		return nil
	}
	var doc, real any
	if err := json.Unmarshal([]byte(c.body), &doc); err != nil {
		return []string{fmt.Sprintf("the documented answer is not JSON (%v): %s", err, c.body)}
	}
	if err := json.Unmarshal([]byte(body), &real); err != nil {
		return []string{fmt.Sprintf("the answer is not JSON (%v): %s", err, body)}
	}
	diffs := shapeDiff("$", doc, real)
	slices.Sort(diffs)
	return diffs
}

// documentedCurls are the documents whose curl examples run, in this
// order: the README's quick start, then the API reference (whose examples
// use the batch and segment the earlier ones created).
var documentedCurls = []struct{ path, heading string }{
	{"../../README.md", "## API quick start"},
	{"../../docs/api.md", ""},
}

// TestReadmeCurlsDeliver runs every curl of the README's API quick start and
// of docs/api.md, as written but for the gateway's address, against a real
// stack (gateway, both dispatchers, provider-sim calling back) with the demo
// company that `parleyctl seed` provisions, and waits until each accepted
// batch has every message delivered or read.
func TestReadmeCurlsDeliver(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the documented examples")
	}
	var cmds []docCommand
	for _, d := range documentedCurls {
		raw, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		found := docCommands(docSection(t, d.path, string(raw), d.heading))
		if len(found) < 4 {
			t.Fatalf("found only %d curl commands in %s %s: %q", len(found), d.path, d.heading, found)
		}
		cmds = append(cmds, found...)
	}
	allowed := map[string]bool{"KEY": true, "BATCH_ID": true, "SEGMENT_ID": true, "MESSAGE_ID": true, "WAMID": true}
	answers := 0
	for _, c := range cmds {
		for _, m := range regexp.MustCompile(`\$([A-Z_]+)`).FindAllStringSubmatch(c.cmd, -1) {
			if !allowed[m[1]] {
				t.Fatalf("a documented curl uses $%s, which the test does not know how to set: %s", m[1], c.cmd)
			}
		}
		if c.body != "" {
			answers++
		}
	}
	// Each answer shown is checked below; the documents show most.
	if answers < 12 {
		t.Fatalf("only %d documented curls show their answer's JSON, want at least 12", answers)
	}

	s := newStack(t)
	bin := filepath.Join(t.TempDir(), "parleyctl")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log bytes.Buffer
	if err := serviceproc.BuildService(ctx, "parleyctl", bin, &log); err != nil {
		t.Fatalf("build parleyctl: %v\n%s", err, log.String())
	}
	seed := exec.CommandContext(ctx, bin, "seed", "--json")
	seed.Env = append(os.Environ(), "PARLEY_POSTGRES_URL="+s.dbURL, "PARLEY_NATS_URL="+s.busCfg.URL,
		"PARLEY_NATS_STREAM="+s.busCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX="+s.busCfg.Prefix)
	var stderr bytes.Buffer
	seed.Stderr = &stderr
	out, err := seed.Output()
	if err != nil {
		t.Fatalf("parleyctl seed: %v\n%s", err, stderr.String())
	}
	var demo struct {
		APIKey        *string `json:"api_key"`
		PhoneNumberID string  `json:"phone_number_id"`
	}
	if err := json.Unmarshal(out, &demo); err != nil || demo.APIKey == nil {
		t.Fatalf("seed printed %s (%v)", out, err)
	}
	token := os.Getenv("PARLEY_DEMO_ACCESS_TOKEN")
	if token == "" {
		token = "parley-demo-access-token"
	}
	if err := s.sim.SetAccount(whatsappsim.Account{PhoneNumberID: demo.PhoneNumberID, Token: token, ThroughputPerSecond: 1000}); err != nil {
		t.Fatal(err)
	}

	vars := map[string]string{"KEY": *demo.APIKey}
	var batches []string
	idRe := regexp.MustCompile(`"batch_id":"([0-9a-f-]{36})"`)
	segRe := regexp.MustCompile(`^\{"id":(\d+),`)
	msgRe := regexp.MustCompile(`"message_id":(\d+)`)
	wamidRe := regexp.MustCompile(`^\{"id":"(wamid\.[^"]+)"`)
	for _, doc := range cmds {
		c := doc.cmd
		// The gateway and provider-sim at the stack's addresses instead of make run's.
		line := strings.ReplaceAll(strings.ReplaceAll(c, "http://127.0.0.1:8080", s.url), "http://127.0.0.1:9090", s.simURL)
		if strings.Contains(c, "/cancel") && vars["BATCH_ID"] != "" {
			// A reader pastes the cancel after the batch was followed to its
			// end; on a loaded machine wait for that, so that the cancel
			// (answering 0) leaves the batch to be delivered as the test expects.
			s.waitBatch(vars["KEY"], vars["BATCH_ID"], time.Minute, func(b map[string]any) bool { return b["status"] == "completed" })
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", `curl() { command curl -w '\n%{http_code}' "$@"; }; `+line)
		cmd.Env = os.Environ()
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s\n%v: %s", c, err, errOut.String())
		}
		out := strings.TrimSpace(string(got))
		cut := strings.LastIndexByte(out, '\n')
		body, status := strings.TrimSpace(out[:max(cut, 0)]), out[cut+1:]
		if !strings.HasPrefix(status, "2") {
			t.Fatalf("%s\nanswered %s %s", c, status, body)
		}
		if diffs := checkAnswer(doc, status, body); len(diffs) > 0 {
			t.Errorf("%s\nanswered %s %s\nwhich is not as documented (%s %s):\n  %s", c, status, body, doc.status, doc.body,
				strings.Join(diffs, "\n  "))
		}
		if m := idRe.FindStringSubmatch(body); m != nil && status == "202" {
			batches = append(batches, m[1])
			if vars["BATCH_ID"] == "" {
				vars["BATCH_ID"] = m[1]
			}
		}
		if m := segRe.FindStringSubmatch(body); m != nil && strings.Contains(c, "/api/segments/create") {
			vars["SEGMENT_ID"] = m[1]
		}
		// MESSAGE_ID is the first message a listing shows (not a reply's
		// 202); WAMID the contact's message provider-sim played last.
		if m := msgRe.FindStringSubmatch(body); m != nil && vars["MESSAGE_ID"] == "" && strings.Contains(c, "/messages") &&
			!strings.Contains(c, "-X POST") {
			vars["MESSAGE_ID"] = m[1]
		}
		if m := wamidRe.FindStringSubmatch(body); m != nil && strings.Contains(c, "/_sim/replies") {
			vars["WAMID"] = m[1]
		}
		if m := msgRe.FindStringSubmatch(body); m != nil && status == "202" && strings.Contains(c, "/api/messages") {
			// A reader who lists the conversation after a reply's 202 sees the
			// reply once the automation dispatcher recorded it, milliseconds
			// later; on a loaded machine wait for that, as for the cancel.
			s.waitMessage(vars["KEY"], m[1], 30*time.Second, "queued", "sending", "sent", "delivered", "read", "failed")
		}
		t.Logf("%s -> %s %s", c, status, body)
	}
	// docs/api.md's simulated STOP opted its user out.
	var optedOut bool
	if err := s.pool.QueryRow(ctx, `SELECT opted_out_at IS NOT NULL FROM contacts WHERE phone = '+447700900123'`).Scan(&optedOut); err != nil || !optedOut {
		t.Fatalf("docs/api.md's STOP reply: opted out %v (%v)", optedOut, err)
	}
	if len(batches) < 6 {
		t.Fatalf("%d batches accepted, want every documented send (6)", len(batches))
	}

	// A scheduled send is due once the clock reaches its time.
	key := *demo.APIKey
	for _, id := range batches {
		b := s.waitBatch(key, id, 15*time.Second, func(b map[string]any) bool { return b["status"] != "accepted" })
		if at, ok := b["scheduled_at"].(string); ok {
			when, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				t.Fatal(err)
			}
			if d := when.Sub(s.clock.now()); d > 0 {
				s.clock.add(d + time.Minute)
			}
		}
	}
	for _, id := range batches {
		b := s.waitBatch(key, id, 30*time.Second, func(b map[string]any) bool {
			c := counts(b)
			total := 0
			for _, n := range c {
				total += n
			}
			return completed(b) && total > 0 && c["delivered"]+c["read"] == total
		})
		t.Logf("batch %s (%s): %v", id, b["kind"], b["counts"])
	}
}

// TestUnrenderableMessageHasItsCode: a message whose template variable is
// empty and has no default fails before the provider with Parley's own
// code and a title that names the variable.
func TestUnrenderableMessageHasItsCode(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	ctx := context.Background()
	tpl, err := s.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.company.ID, Template: whatsapp.Template{
		Name: "strict", BodyParameters: []whatsapp.Binding{{Source: "variable", Name: "order_id"}}}})
	if err != nil {
		t.Fatal(err)
	}
	camp, err := s.cat.CreateCampaign(ctx, co.company.ID, "strict", tpl.ID, co.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	const to = "+393330000501"
	r := s.post("/api/campaigns/send", co.key, campaignBody(camp.ID, to))
	id := r.json(t)["batch_id"].(string)
	if c := counts(s.waitBatch(co.key, id, 15*time.Second, completed)); c["failed"] != 1 {
		t.Fatalf("counts %v", c)
	}
	var code int
	var title string
	if err := s.pool.QueryRow(ctx, `SELECT error_code, error_title FROM messages WHERE batch_id = $1`, id).Scan(&code, &title); err != nil {
		t.Fatal(err)
	}
	if code != whatsapp.CodeVariableMissing || !strings.HasPrefix(title, "Template variable missing: body parameter 1 (variable order_id)") {
		t.Fatalf("code %d, title %q", code, title)
	}
	if n := len(s.received(to)); n != 0 {
		t.Fatalf("the provider got %d messages that could not be rendered", n)
	}
	// The same campaign with the variable (from an automation's contact
	// record) renders.
	if c := s.sendAndWait(co, true, to); sentOrLater(c) != 1 {
		t.Fatalf("automation: %v", c)
	}
	r = s.post("/api/campaigns/send", co.key, campaignBody(camp.ID, to))
	if c := counts(s.waitBatch(co.key, r.json(t)["batch_id"].(string), 15*time.Second, completed)); sentOrLater(c) != 1 {
		t.Fatalf("with the variable stored: %v", c)
	}
}

// TestDocCommandsTextAnswer: a documented answer that is not JSON (a CSV
// file's header) is its first line, compared as text, and the comment
// after it is not taken for more of it.
func TestDocCommandsTextAnswer(t *testing.T) {
	cmds := docCommands("```sh\n# a file\ncurl -sS http://x/a.csv\n# 200 id,phone\n# the next one\n" +
		"curl -sS http://x/b\n# 200 {\"a\":\n#   1}\n```\n")
	if len(cmds) != 2 || cmds[0].status != "200" || cmds[0].body != "id,phone" || cmds[1].body != `{"a": 1}` {
		t.Fatalf("%+v", cmds)
	}
	if d := checkAnswer(cmds[0], "200", "id,phone\r\n1,'+39333\r\n"); d != nil {
		t.Fatalf("the same first line: %v", d)
	}
	if d := checkAnswer(cmds[0], "200", "id,name\r\n"); len(d) != 1 {
		t.Fatalf("another first line: %v", d)
	}
}
