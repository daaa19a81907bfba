package validation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// TestDifferential compares the package with testdata/gen_reference.py on
// generated bodies: structured ones around every field rule, and random
// edits of the reference bodies. It runs whenever python3 (or the
// interpreter PARLEY_VALIDATION_PYTHON names) is CPython 3.11/3.12 with
// the pydantic 2 minor version the reference table was made with; it skips
// otherwise, unless PARLEY_VALIDATION_PYTHON was set, which makes a missing
// or wrong interpreter a failure. The seed is fixed (1) and the cases
// bounded (5,000, a few seconds) so that CI runs the same bodies every
// time; PARLEY_VALIDATION_CASES and PARLEY_VALIDATION_SEED change them.
func TestDifferential(t *testing.T) {
	python := differentialPython(t)
	n := envInt(t, "PARLEY_VALIDATION_CASES", 5000)
	seed := uint64(envInt(t, "PARLEY_VALIDATION_SEED", 1))
	t.Logf("%s, %d cases, seed %d", python, n, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &bodyGen{rng: rng, seeds: loadReference(t).Cases}

	type req struct {
		Endpoint    string  `json:"endpoint"`
		BodyB64     string  `json:"body_b64"`
		ContentType string  `json:"content_type"`
		Path        *string `json:"path"`
	}
	reqs := make([]req, n)
	bodies := make([][]byte, n)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for i := range reqs {
		endpoint, body := g.next()
		reqs[i] = req{Endpoint: endpoint, BodyB64: base64.StdEncoding.EncodeToString(body), ContentType: "application/json"}
		if endpoint == "segment_contacts" {
			p := g.pathValue()
			reqs[i].Path = &p
		}
		bodies[i] = body
		if err := enc.Encode(reqs[i]); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "gen_reference.py"), "--eval")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run reference: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	failures := 0
	seen := map[string]int{}
	for i := 0; sc.Scan(); i++ {
		var want refExpect
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatalf("case %d: reference output: %v", i, err)
		}
		status, body, value := answer(reqs[i].Endpoint, reqs[i].ContentType, deref(reqs[i].Path), bodies[i])
		seen[outcomeKind(want)]++
		ok := status == want.Status
		if ok && status == 200 {
			ok = bytes.Equal(canonical(t, value), canonical(t, normaliseIDs(t, want.Value)))
		} else if ok {
			ok = string(body) == want.Body
		}
		if !ok {
			failures++
			if failures <= 20 {
				t.Errorf("case %d (%s) body %q\n got: %d %s %s\nwant: %d %s %s", i, reqs[i].Endpoint, clip(bodies[i]),
					status, clip(body), clip(value), want.Status, clip([]byte(want.Body)), clip(want.Value))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("outcomes: %v", seen)
	if failures > 0 {
		t.Fatalf("%d of %d generated bodies differ from the reference", failures, n)
	}
}

// differentialPython is the interpreter to compare with, or skips the test.
// It must be CPython 3.11 or 3.12 with pydantic of the major.minor version
// that made testdata/reference.json (another minor may answer differently,
// which is not a bug of this package).
func differentialPython(t *testing.T) string {
	t.Helper()
	python, required := os.Getenv("PARLEY_VALIDATION_PYTHON"), true
	if python == "" {
		python, required = "python3", false
	}
	skip := func(format string, args ...any) string {
		if required {
			t.Fatalf("PARLEY_VALIDATION_PYTHON=%s: "+format, append([]any{python}, args...)...)
		}
		t.Skipf("%s: "+format+"; the differential test against pydantic runs where it is", append([]any{python}, args...)...)
		return ""
	}
	if _, err := exec.LookPath(python); err != nil {
		return skip("not found")
	}
	out, err := exec.Command(python, "-c", "import sys, pydantic, pydantic_core; print('%d.%d' % sys.version_info[:2], pydantic.VERSION, pydantic_core.__version__)").Output()
	if err != nil {
		return skip("no pydantic (%v)", err)
	}
	f := strings.Fields(string(out))
	want := loadReference(t)
	if len(f) != 3 || (f[0] != "3.11" && f[0] != "3.12") {
		return skip("CPython %s; the reference needs 3.11 or 3.12", strings.TrimSpace(string(out)))
	}
	if minor(f[1]) != minor(want.Pydantic) {
		return skip("pydantic %s; the reference table was made with %s", f[1], want.Pydantic)
	}
	return python
}

// minor is "2.13" of "2.13.4".
func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// outcomeKind names a reference outcome by status and first error type, to
// show what the generated bodies exercised.
func outcomeKind(e refExpect) string {
	if e.Status != 422 {
		return strconv.Itoa(e.Status)
	}
	var body struct {
		Detail []struct {
			Type string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(e.Body), &body); err != nil || len(body.Detail) == 0 {
		return "422"
	}
	return body.Detail[0].Type
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// bodyGen makes request bodies that stay close to the interesting edges.
type bodyGen struct {
	rng   *rand.Rand
	seeds []refCase
}

func (g *bodyGen) pick(options ...string) string { return options[g.rng.IntN(len(options))] }

func (g *bodyGen) next() (string, []byte) {
	endpoint, body := g.body()
	if g.rng.IntN(15) == 0 && utf8.Valid(body) {
		body = g.reencode(body)
	}
	return endpoint, body
}

// reencode writes the body in one of the other encodings json.loads detects.
func (g *bodyGen) reencode(body []byte) []byte {
	units := utf16.Encode([]rune(string(body)))
	var out []byte
	switch g.rng.IntN(5) {
	case 0, 1, 2:
		var order binary.AppendByteOrder = binary.LittleEndian
		if g.rng.IntN(2) == 0 {
			order = binary.BigEndian
		}
		if g.rng.IntN(2) == 0 {
			out = order.AppendUint16(out, 0xFEFF)
		}
		for _, u := range units {
			out = order.AppendUint16(out, u)
		}
	default:
		var order binary.AppendByteOrder = binary.LittleEndian
		if g.rng.IntN(2) == 0 {
			order = binary.BigEndian
		}
		if g.rng.IntN(2) == 0 {
			out = order.AppendUint32(out, 0xFEFF)
		}
		for _, r := range string(body) {
			out = order.AppendUint32(out, uint32(r))
		}
	}
	if g.rng.IntN(10) == 0 && len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

func (g *bodyGen) body() (string, []byte) {
	switch g.rng.IntN(18) {
	case 0, 1, 2, 17:
		return g.mutated()
	case 3, 4, 5:
		return "campaign", []byte(g.campaign())
	case 6, 7:
		// Everything valid but the instant, so that accepted values are
		// compared too.
		return "campaign", []byte(`{"campaign_id":1,"contacts":["+1234567"],"scheduled_at":` + g.jsonStr(g.datetime()) + `}`)
	case 8, 9, 10:
		return "automation", []byte(g.automation())
	case 11:
		return "segment_create", []byte(g.object([][2]string{{"name", g.segmentName()}, {"contacts", g.contacts(false)}}))
	case 12:
		return "segment_contacts", []byte(g.object([][2]string{{"contacts", g.contacts(false)}}))
	case 13, 14:
		return "batch", []byte(g.batch())
	default:
		return "connector", []byte(g.object([][2]string{{"contacts", g.contacts(true)}, {"url", g.url()}, {"image_url", g.url()}}))
	}
}

// pathValue is a segment_id path segment.
func (g *bodyGen) pathValue() string {
	return g.pick("7", " 7 ", "+7", "-7", "0", "1_000", "7.0", "7.5", "", "abc", "0x7", "1e3", "\u0667", "99999999999999999999999", "7 7")
}

func (g *bodyGen) segmentName() string {
	if g.rng.IntN(6) == 0 {
		return g.pick("null", "5", "[]", `"\ud800"`)
	}
	return g.jsonStr(g.pick("", " ", "VIP", " VIP ", "\u00a0x\u2003", "\u200b", "\x1c", "\t\n", "\u3000",
		strings.Repeat("n", 255), " "+strings.Repeat("n", 255)+" ", strings.Repeat("n", 256), strings.Repeat("é", 256)))
}

// contacts is a list of contact objects, with the media fields when media.
func (g *bodyGen) contacts(media bool) string {
	if g.rng.IntN(12) == 0 {
		return g.pick("null", `"x"`, "{}", "5")
	}
	cs := make([]string, g.rng.IntN(4))
	for i := range cs {
		if g.rng.IntN(12) == 0 {
			cs[i] = g.pick(`"+1234567"`, "null", "1", "[]")
			continue
		}
		members := [][2]string{{"phone", g.phoneValue()}, {"first_name", g.name()}, {"last_name", g.name()}, {"variables", g.variables()}}
		if media || g.rng.IntN(4) == 0 {
			members = append(members, [2]string{"image_url", g.url()}, [2]string{"video_url", g.url()})
		}
		cs[i] = g.object(members)
	}
	return "[" + strings.Join(cs, ",") + "]"
}

func (g *bodyGen) optionalID() string {
	if g.rng.IntN(2) == 0 {
		return ""
	}
	return g.pick("1", "null", "12", `"5"`, "2.0", "2.5", `"x"`, "18446744073709551616")
}

func (g *bodyGen) batch() string {
	ms := make([]string, g.rng.IntN(4))
	for i := range ms {
		members := [][2]string{{"phone", g.phoneValue()}}
		for _, k := range []string{"campaign_id", "template_id", "messaging_account_id"} {
			if v := g.optionalID(); v != "" {
				members = append(members, [2]string{k, v})
			}
		}
		members = append(members, [2]string{"first_name", g.name()}, [2]string{"variables", g.variables()}, [2]string{"url2", g.url()})
		ms[i] = g.object(members)
	}
	return g.object([][2]string{{"messages", "[" + strings.Join(ms, ",") + "]"}, {"is_forced", g.boolValue()}, {"scheduled_at", g.jsonStr(g.datetime())}})
}

// mutated edits a reference body at random.
func (g *bodyGen) mutated() (string, []byte) {
	c := g.seeds[g.rng.IntN(len(g.seeds))]
	var b []byte
	if c.Body != nil {
		b = []byte(*c.Body)
	} else {
		b, _ = base64.StdEncoding.DecodeString(c.BodyB64)
	}
	if len(b) > 4096 {
		b = b[:4096]
	}
	b = append([]byte(nil), b...)
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, "u", "0", "1", "-", "+", ".", "e", " ", "\n", "\t",
		"n", "N", "I", "a", "é", "😀", "\x00", "\x1f", "\xed\xa0\x80", "\xff", "\\ud800", "\\udc00", "_sa"}
	for k := g.rng.IntN(3) + 1; k > 0; k-- {
		i := 0
		if len(b) > 0 {
			i = g.rng.IntN(len(b) + 1)
		}
		switch g.rng.IntN(4) {
		case 0: // insert
			b = append(b[:i], append([]byte(g.pick(alphabet...)), b[i:]...)...)
		case 1: // delete
			if i < len(b) {
				b = append(b[:i], b[min(len(b), i+1+g.rng.IntN(3)):]...)
			}
		case 2: // truncate
			b = b[:i]
		default: // replace
			if i < len(b) {
				b = append(b[:i], append([]byte(g.pick(alphabet...)), b[i+1:]...)...)
			}
		}
	}
	return c.Endpoint, b
}

func (g *bodyGen) ws() string {
	if g.rng.IntN(4) != 0 {
		return ""
	}
	return g.pick(" ", "\n", "\t ", "\r\n")
}

// object writes members in random order, sometimes repeating or dropping
// one, sometimes escaping a key.
func (g *bodyGen) object(members [][2]string) string {
	g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	var b strings.Builder
	b.WriteString("{" + g.ws())
	first := true
	for _, m := range members {
		if g.rng.IntN(12) == 0 {
			continue
		}
		reps := 1
		if g.rng.IntN(15) == 0 {
			reps = 2
		}
		for r := 0; r < reps; r++ {
			if !first {
				b.WriteString("," + g.ws())
			}
			first = false
			key := strconv.Quote(m[0])
			if g.rng.IntN(20) == 0 && len(m[0]) > 1 {
				key = `"` + m[0][:1] + fmt.Sprintf(`\u%04x`, m[0][1]) + m[0][2:] + `"`
			}
			b.WriteString(key + g.ws() + ":" + g.ws() + m[1] + g.ws())
		}
	}
	if g.rng.IntN(10) == 0 {
		b.WriteString(`,"_sa_x":1,"extra":{"_sab":[1.5,NaN]}`)
	}
	if g.rng.IntN(10) == 0 && len(members) > 0 {
		// Past 16 keys objects are indexed differently; repeat a real
		// field there.
		for i := 0; i < 18; i++ {
			fmt.Fprintf(&b, `,"x%d":%d`, i%15, i)
		}
		m := members[g.rng.IntN(len(members))]
		b.WriteString("," + strconv.Quote(m[0]) + ":" + m[1])
	}
	b.WriteString("}")
	return b.String()
}

func (g *bodyGen) jsonStr(s string) string {
	b, _ := json.Marshal(s)
	out := string(b)
	if g.rng.IntN(8) == 0 {
		out = strings.ReplaceAll(out, "+", `\u002b`)
	}
	return out
}

func (g *bodyGen) intValue() string {
	switch g.rng.IntN(6) {
	case 0:
		return g.pick("1", "0", "-0", "42", "-7", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
			"123456789012345678901234567890", "1.0", "1.5", "-0.0", "1e3", "1E2", "1e-3", "9.2e18", "9.3e18", "1e400",
			"NaN", "Infinity", "-Infinity", "true", "false", "null", "[]", "{}", "[1]")
	case 1:
		return g.jsonStr(g.intString())
	default:
		return strconv.Itoa(g.rng.IntN(1000000))
	}
}

func (g *bodyGen) intString() string {
	var b strings.Builder
	for k := g.rng.IntN(8); k >= 0; k-- {
		b.WriteString(g.pick("0", "1", "2", "9", "00", "_", ".", "0", "-", "+", " ", "\u00a0", "e", "x", "١", "12345678901234567890"))
	}
	return b.String()
}

func (g *bodyGen) boolValue() string {
	return g.pick("true", "false", "0", "1", "2", "-1", "0.0", "1.0", "2.0", "0.5", "1e20", "NaN", "null", `""`,
		`"true"`, `"TRUE"`, `"yes"`, `"Y"`, `"on"`, `"ON"`, `"off"`, `"no"`, `"n"`, `"f"`, `"t"`, `"1"`, `"0"`,
		`"tru"`, `" true"`, `"yeſ"`, "[]", "{}", "9223372036854775807", "9223372036854775808", "-9.223372036854775808e18")
}

func (g *bodyGen) phone() string {
	switch g.rng.IntN(5) {
	case 0:
		return g.pick("1234567", "123456", "+123456789012345", "+1234567890123456", "0123456", "+0123456", "++1234567",
			"+1234567\n", "+١٢٣٤٥٦٧٨", "12345678９", "", "+", "+1 234567")
	case 1:
		var b strings.Builder
		for k := g.rng.IntN(18); k >= 0; k-- {
			b.WriteString(g.pick("1", "2", "0", "9", "+", " ", "-", "٣", "a"))
		}
		return b.String()
	default:
		return "+39" + strconv.Itoa(300000000+g.rng.IntN(699999999))
	}
}

func (g *bodyGen) phoneValue() string {
	if g.rng.IntN(10) == 0 {
		return g.pick("1234567", "null", "true", "1.5", "[]", "{}", `"+1234567\ud800"`, "\"+123456\xed\xa0\x80\"")
	}
	return g.jsonStr(g.phone())
}

func (g *bodyGen) datetime() string {
	switch g.rng.IntN(4) {
	case 0:
		return g.pick("2030-01-02T03:04:05Z", "2030-01-02", "2030-01-02 03:04", "1700000000", "1700000000.5", "-1",
			"1.5e3", ".5", "+.5", "1.", "0000-01-01", "9999-12-31T23:59:59.999999-23:59", "20000000000", "20000000000.5",
			"-62167219200000", "253402300800000", "18446744073709551620", "-9223372036854775808", "9223372036854775807",
			"2030-02-29", "2028-02-29T24:00", "tomorrow", "", "2030-01-02T03:04:05−01:00", "2030-01-02T03:04:05,123456789")
	case 1:
		var b strings.Builder
		for k := g.rng.IntN(12); k >= 0; k-- {
			b.WriteString(g.pick("2030", "-", "01", "13", "29", "31", "00", "T", " ", "_", "t", ":", "59", "60", "23", "24",
				".", ",", "5", "Z", "z", "+", "−", "01:00", "0130", "e", "1"))
		}
		return b.String()
	default:
		return fmt.Sprintf("%04d-%02d-%02d%s%02d:%02d%s%s", g.rng.IntN(10000), g.rng.IntN(14), g.rng.IntN(33),
			g.pick("T", " ", "t", "_", "x"), g.rng.IntN(25), g.rng.IntN(61),
			g.pick("", ":00", ":59", ":60", ":05.1", ":05.1234567", ":05,5", ":05."),
			g.pick("", "Z", "+01:00", "-0130", "+24:00", "+01:60", "+1", "−02:00", " "))
	}
}

func (g *bodyGen) campaign() string {
	contacts := make([]string, g.rng.IntN(6))
	for i := range contacts {
		contacts[i] = g.phoneValue()
	}
	list := "[" + strings.Join(contacts, ",") + "]"
	if g.rng.IntN(15) == 0 {
		list = g.pick(`"+1234567"`, "null", "{}", "5")
	}
	sched := g.jsonStr(g.datetime())
	if g.rng.IntN(10) == 0 {
		sched = g.pick("null", "5", "true", strconv.Quote(strings.Repeat("1", 64)), strconv.Quote("2030-01-02T03:04:05."+strings.Repeat("1", 44)+"Z"))
	}
	members := [][2]string{
		{"campaign_id", g.intValue()},
		{"contacts", list},
		{"is_forced", g.boolValue()},
		{"scheduled_at", sched},
	}
	if g.rng.IntN(3) == 0 {
		members = append(members, [2]string{"segment_id", g.pick("5", "null", `"5"`, "5.5", "[]", "18446744073709551616")})
	}
	return g.object(members)
}

func (g *bodyGen) url() string {
	if g.rng.IntN(8) == 0 {
		return g.pick("null", "5", "false", "[]")
	}
	switch g.rng.IntN(3) {
	case 0:
		return g.jsonStr(g.pick("https://x.io/a", "http://", "https://", "ftp://x", "http://a b", "http://a\u00a0b",
			"http://a\u2028", "http://a\u200b", "HTTP://x", "http://x\n", "", "http://é.io/😀", "https://x.io/"+strings.Repeat("a", 2035),
			"https://x.io/"+strings.Repeat("a", 2036), "https://x.io/"+strings.Repeat("é", 2036)))
	default:
		return g.jsonStr(g.pick("http://", "https://") + g.pick("a", "é", " ", "\t", "x.io/p?q=1", "\u3000", "\u0085"))
	}
}

func (g *bodyGen) name() string {
	if g.rng.IntN(8) == 0 {
		return g.pick("null", "1", "[]", strconv.Quote(strings.Repeat("a", 255)), strconv.Quote(strings.Repeat("a", 256)),
			g.jsonStr(strings.Repeat("é", 256)), g.jsonStr(strings.Repeat("😀", 255)), `"\ud800"`)
	}
	return g.jsonStr(g.pick("Ana", "José", "张伟", "😀", ""))
}

func (g *bodyGen) variables() string {
	if g.rng.IntN(8) == 0 {
		return g.pick("null", "[]", `"x"`, "1", "{}")
	}
	members := make([][2]string, g.rng.IntN(4))
	for i := range members {
		key := g.pick("a", "b", "order", "ключ", "😀", strings.Repeat("k", 100), strings.Repeat("k", 101), strings.Repeat("😀", 101))
		val := g.jsonStr(g.pick("1", "", "é", strings.Repeat("v", 4096), strings.Repeat("v", 4097)))
		if g.rng.IntN(6) == 0 {
			val = g.pick("1", "null", "true", "[]", "{}", "1.5", `"\udc00"`)
		}
		members[i] = [2]string{key, val}
	}
	return g.object(members)
}

func (g *bodyGen) automation() string {
	contacts := make([]string, g.rng.IntN(4))
	for i := range contacts {
		if g.rng.IntN(12) == 0 {
			contacts[i] = g.pick(`"+1234567"`, "null", "1", "[]")
			continue
		}
		contacts[i] = g.object([][2]string{
			{"phone", g.phoneValue()},
			{"first_name", g.name()},
			{"last_name", g.name()},
			{"image_url", g.url()},
			{"video_url", g.url()},
			{"variables", g.variables()},
		})
	}
	return g.object([][2]string{
		{"automation_id", g.intValue()},
		{"contacts", "[" + strings.Join(contacts, ",") + "]"},
		{"image_url", g.url()},
		{"video_url", g.url()},
		{"url", g.url()},
		{"url2", g.url()},
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
