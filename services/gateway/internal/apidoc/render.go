package apidoc

import (
	"bytes"
	_ "embed"
	"fmt"
	"html"
	"regexp"
	"strings"
)

//go:embed docs.css
var css string

// page writes the HTML of the documentation; every text from the document
// goes through esc or md.
type page struct {
	root *object
	b    strings.Builder
}

func esc(s string) string { return html.EscapeString(s) }

func (p *page) w(format string, args ...any) { fmt.Fprintf(&p.b, format, args...) }

func str(o *object, k string) string {
	if o == nil {
		return ""
	}
	s, _ := o.get(k).(string)
	return s
}

func obj(o *object, k string) *object {
	if o == nil {
		return nil
	}
	v, _ := o.get(k).(*object)
	return v
}

// resolve follows a local $ref ("#/components/schemas/X") once or more.
func (p *page) resolve(o *object) *object {
	for i := 0; o != nil && i < 8; i++ {
		ref := str(o, "$ref")
		if ref == "" {
			return o
		}
		o = p.pointer(ref)
	}
	return o
}

func (p *page) pointer(ref string) *object {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	cur := p.root
	for _, part := range strings.Split(ref[2:], "/") {
		cur = obj(cur, strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~"))
		if cur == nil {
			return nil
		}
	}
	return cur
}

func refName(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }

func renderHTML(root *object) ([]byte, string, error) {
	p := &page{root: root}
	info := obj(root, "info")
	title, version := str(info, "title"), str(info, "version")
	paths := obj(root, "paths")
	if paths == nil {
		return nil, "", fmt.Errorf("openapi document without paths")
	}
	type op struct {
		method, path string
		o            *object
	}
	byTag := map[string][]op{}
	for _, path := range paths.keys {
		item := obj(paths, path)
		for _, m := range item.keys {
			o := obj(item, m)
			if o == nil {
				continue
			}
			tag := "Other"
			if tags, _ := o.get("tags").([]any); len(tags) > 0 {
				tag, _ = tags[0].(string)
			}
			byTag[tag] = append(byTag[tag], op{m, path, o})
		}
	}
	// The webhooks (OpenAPI 3.1) are the events Parley sends: listed under
	// their tag like operations, named by event type instead of a path.
	if hooks := obj(root, "webhooks"); hooks != nil {
		for _, name := range hooks.keys {
			item := obj(hooks, name)
			for _, m := range item.keys {
				if o := obj(item, m); o != nil {
					tag := "Other"
					if tags, _ := o.get("tags").([]any); len(tags) > 0 {
						tag, _ = tags[0].(string)
					}
					byTag[tag] = append(byTag[tag], op{m, name, o})
				}
			}
		}
	}
	var tags []*object
	for _, t := range asSlice(root.get("tags")) {
		if to, ok := t.(*object); ok {
			tags = append(tags, to)
		}
	}

	p.w(`<!doctype html><html lang="en"><head><meta charset="utf-8">`)
	p.w(`<meta name="viewport" content="width=device-width, initial-scale=1">`)
	p.w(`<title>%s %s</title><style>%s</style></head><body><div class="layout"><nav>`, esc(title), esc(version), css)
	p.w(`<div class="brand">%s</div><div class="version">version %s &middot; <a href="openapi.json">openapi.json</a></div>`, esc(title), esc(version))
	p.w(`<ul><li><a href="#overview">Overview</a></li></ul>`)
	for _, t := range tags {
		name := str(t, "name")
		p.w(`<h4>%s</h4><ul>`, esc(name))
		for _, o := range byTag[name] {
			p.w(`<li><a href="#%s"><span class="method %s">%s</span><span>%s</span></a></li>`,
				esc(str(o.o, "operationId")), esc(o.method), esc(o.method), esc(str(o.o, "summary")))
		}
		p.w(`</ul>`)
	}
	p.w(`<h4>Schemas</h4><ul>`)
	schemas := obj(obj(root, "components"), "schemas")
	if schemas != nil {
		for _, name := range schemas.keys {
			p.w(`<li><a href="#schema-%s">%s</a></li>`, esc(name), esc(name))
		}
	}
	p.w(`</ul></nav><main>`)
	p.w(`<h1>%s</h1><p class="lead">%s</p>`, esc(title), esc(str(info, "summary")))
	p.w(`<section id="overview">%s</section>`, md(str(info, "description")))
	if sec := obj(obj(root, "components"), "securitySchemes"); sec != nil {
		for _, name := range sec.keys {
			s := obj(sec, name)
			p.w(`<h3>Security scheme <code>%s</code></h3><p>API key in the <code>%s</code> %s.</p>%s`,
				esc(name), esc(str(s, "name")), esc(str(s, "in")), md(str(s, "description")))
		}
	}
	for _, t := range tags {
		name := str(t, "name")
		p.w(`<h2 id="tag-%s">%s</h2>%s`, esc(anchor(name)), esc(name), md(str(t, "description")))
		for _, o := range byTag[name] {
			p.operation(o.method, o.path, o.o)
		}
	}
	if schemas != nil {
		p.w(`<h2 id="schemas">Schemas</h2>`)
		for _, name := range schemas.keys {
			s := obj(schemas, name)
			p.w(`<div class="schema" id="schema-%s"><h3>%s</h3>`, esc(name), esc(name))
			p.w(`<p class="summary">%s</p>`, esc(p.typeText(s)))
			p.w(`%s`, md(str(s, "description")))
			if r := p.rules(s); r != "" {
				p.w(`<p class="rules">%s</p>`, r)
			}
			p.properties(s, 0)
			p.w(`</div>`)
		}
	}
	p.w(`</main></div></body></html>`)
	return []byte(p.b.String()), css, nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

var nonAnchor = regexp.MustCompile(`[^a-z0-9]+`)

func anchor(s string) string {
	return strings.Trim(nonAnchor.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func (p *page) operation(method, path string, o *object) {
	p.w(`<article class="op" id="%s"><h3><span class="method %s">%s</span><span class="path">%s</span></h3>`,
		esc(str(o, "operationId")), esc(method), esc(method), esc(path))
	p.w(`<p class="summary">%s</p><div class="badges">`, esc(str(o, "summary")))
	if !strings.HasPrefix(path, "/") {
		p.w(`<span class="badge">sent by Parley to your endpoint, signed (webhook-signature)</span>`)
	} else if sec, ok := o.get("security").([]any); ok && len(sec) == 0 {
		p.w(`<span class="badge">no API key</span>`)
	} else {
		p.w(`<span class="badge">service-api-key</span>`)
	}
	if rl := obj(o, "x-ratelimit"); rl != nil {
		p.w(`<span class="badge limit">%s</span>`, esc(str(rl, "description")))
	}
	p.w(`</div>%s`, md(str(o, "description")))

	var params []*object
	for _, v := range asSlice(o.get("parameters")) {
		if po, ok := v.(*object); ok {
			params = append(params, p.resolve(po))
		}
	}
	if len(params) > 0 {
		p.w(`<h4>Parameters</h4><table><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr>`)
		for _, pa := range params {
			req := ""
			if b, _ := pa.get("required").(bool); b {
				req = `<span class="req">required</span>`
			}
			schema := obj(pa, "schema")
			p.w(`<tr><td class="name">%s%s</td><td class="type">%s</td><td class="type">%s</td><td>%s`,
				esc(str(pa, "name")), req, esc(str(pa, "in")), p.typeHTML(schema), md(str(pa, "description")))
			if r := p.rules(p.resolve(schema)); r != "" {
				p.w(`<span class="rules">%s</span>`, r)
			}
			p.w(`</td></tr>`)
		}
		p.w(`</table>`)
	}

	if rb := p.resolve(obj(o, "requestBody")); rb != nil {
		p.w(`<h4>Request body</h4>%s`, md(str(rb, "description")))
		content := obj(rb, "content")
		for _, mt := range content.keys {
			media := obj(content, mt)
			schema := obj(media, "schema")
			p.w(`<p><code>%s</code> &middot; %s</p>`, esc(mt), p.typeHTML(schema))
			p.properties(p.resolve(schema), 0)
			p.requestExamples(media, method, path, params)
		}
	}

	if responses := obj(o, "responses"); responses != nil {
		p.w(`<h4>Responses</h4>`)
		for _, status := range responses.keys {
			r := p.resolve(obj(responses, status))
			class := "s" + status[:1]
			p.w(`<div class="resp"><p><span class="status %s">%s</span>%s</p>`, esc(class), esc(status), mdInline(str(r, "description")))
			if headers := obj(r, "headers"); headers != nil {
				var names []string
				for _, h := range headers.keys {
					names = append(names, "<code>"+esc(h)+"</code>")
				}
				p.w(`<p class="rules">Headers: %s</p>`, strings.Join(names, ", "))
			}
			if content := obj(r, "content"); content != nil {
				for _, mt := range content.keys {
					media := obj(content, mt)
					p.w(`<p class="rules"><code>%s</code> &middot; %s</p>`, esc(mt), p.typeHTML(obj(media, "schema")))
					p.examples(media)
				}
			}
			p.w(`</div>`)
		}
	}
	p.w(`</article>`)
}

// namedExample is one example of a media type.
type namedExample struct {
	label string
	value any
}

func (p *page) exampleList(media *object) []namedExample {
	var out []namedExample
	if v, ok := media.vals["example"]; ok {
		out = append(out, namedExample{"", v})
	}
	if exs := obj(media, "examples"); exs != nil {
		for _, name := range exs.keys {
			ex := p.resolve(obj(exs, name))
			label := str(ex, "summary")
			if label == "" {
				label = name
			}
			out = append(out, namedExample{label, ex.get("value")})
		}
	}
	return out
}

// examples writes a media type's examples.
func (p *page) examples(media *object) {
	for _, ex := range p.exampleList(media) {
		if ex.label != "" {
			p.w(`<p class="example-name">Example: %s</p>`, esc(ex.label))
		}
		p.w(`<pre><code>%s</code></pre>`, esc(pretty(ex.value)))
	}
}

// requestExamples writes the first request example as a curl command and
// the others as bodies.
func (p *page) requestExamples(media *object, method, path string, params []*object) {
	for i, ex := range p.exampleList(media) {
		label := ex.label
		if label == "" {
			label = "request"
		}
		if i == 0 {
			p.w(`<p class="example-name">Example: %s, with curl</p>`, esc(label))
			p.curl(method, path, params, ex.value)
			continue
		}
		p.w(`<p class="example-name">Example: %s</p><pre><code>%s</code></pre>`, esc(label), esc(pretty(ex.value)))
	}
}

func pretty(v any) string {
	var b bytes.Buffer
	if err := writeJSON(&b, v, ""); err != nil {
		return fmt.Sprint(v)
	}
	return b.String()
}

// curl writes a ready-to-paste command for an example body.
func (p *page) curl(method, path string, params []*object, body any) {
	for _, pa := range params {
		if str(pa, "in") == "path" {
			path = strings.ReplaceAll(path, "{"+str(pa, "name")+"}", fmt.Sprint(pa.get("example")))
		}
	}
	p.w(`<pre><code>%s</code></pre>`, esc(fmt.Sprintf(
		"curl -sS -X %s \"$PARLEY_URL%s\" \\\n  -H \"service-api-key: $PARLEY_API_KEY\" \\\n  -H \"Content-Type: application/json\" \\\n  -d @- <<'JSON'\n%s\nJSON",
		strings.ToUpper(method), path, pretty(body))))
}

// properties writes the table of an object schema's properties.
func (p *page) properties(s *object, depth int) {
	props := obj(s, "properties")
	if props == nil || len(props.keys) == 0 || depth > 2 {
		return
	}
	required := map[string]bool{}
	for _, r := range asSlice(s.get("required")) {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	p.w(`<table><tr><th>Field</th><th>Type</th><th>Description</th></tr>`)
	for _, name := range props.keys {
		prop := obj(props, name)
		req := ""
		if required[name] {
			req = `<span class="req">required</span>`
		}
		desc := str(prop, "description")
		target := p.resolve(prop)
		if desc == "" && target != nil {
			desc = str(target, "description")
		}
		p.w(`<tr><td class="name">%s%s</td><td class="type">%s</td><td>%s`, esc(name), req, p.typeHTML(prop), md(desc))
		rules := p.rules(prop)
		if r := p.rules(target); str(prop, "$ref") != "" && r != "" && str(target, "type") != "object" {
			rules = r
		}
		if rules != "" {
			p.w(`<span class="rules">%s</span>`, rules)
		}
		if str(prop, "$ref") == "" {
			p.properties(prop, depth+1)
		}
		p.w(`</td></tr>`)
	}
	p.w(`</table>`)
}

// typeHTML is a schema's type with links to named schemas.
func (p *page) typeHTML(s *object) string {
	if s == nil {
		return "any"
	}
	if ref := str(s, "$ref"); ref != "" {
		name := refName(ref)
		link := fmt.Sprintf(`<a href="#schema-%s">%s</a>`, esc(name), esc(name))
		// A named scalar reads better with its type: "string (Phone)".
		if target := p.resolve(s); target != nil && target != s && obj(target, "properties") == nil && str(target, "type") != "object" {
			return p.typeHTML(target) + " (" + link + ")"
		}
		return link
	}
	one := asSlice(s.get("oneOf"))
	if len(one) == 0 {
		one = asSlice(s.get("anyOf"))
	}
	if len(one) > 0 && s.get("type") == nil {
		var parts []string
		for _, v := range one {
			if o, ok := v.(*object); ok {
				parts = append(parts, p.typeHTML(o))
			}
		}
		return strings.Join(parts, " or ")
	}
	types := typeNames(s)
	for i, t := range types {
		switch t {
		case "array":
			types[i] = "array of " + p.typeHTML(obj(s, "items"))
		case "object":
			if ap := obj(s, "additionalProperties"); ap != nil {
				types[i] = "map of string to " + p.typeHTML(ap)
			}
		}
	}
	out := strings.Join(types, " or ")
	if c, ok := s.vals["const"]; ok {
		out += " " + esc(pretty(c))
	}
	if out == "" {
		return "any"
	}
	return out
}

func (p *page) typeText(s *object) string {
	return tagText.ReplaceAllString(html.UnescapeString(p.typeHTML(s)), "")
}

var tagText = regexp.MustCompile(`<[^>]*>`)

func typeNames(s *object) []string {
	switch t := s.get("type").(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if n, ok := v.(string); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// rules is a schema's constraints in words.
func (p *page) rules(s *object) string {
	if s == nil {
		return ""
	}
	var out []string
	num := func(k string) (string, bool) {
		v, ok := s.vals[k]
		if !ok {
			return "", false
		}
		return fmt.Sprint(v), true
	}
	if v, ok := num("minLength"); ok {
		out = append(out, "at least "+v+plural(v, " character"))
	}
	if v, ok := num("maxLength"); ok {
		out = append(out, "at most "+v+plural(v, " character"))
	}
	if v, ok := num("maxItems"); ok {
		out = append(out, "at most "+v+plural(v, " item"))
	}
	if v, ok := num("minimum"); ok {
		out = append(out, "at least "+v)
	}
	if pat := str(s, "pattern"); pat != "" {
		out = append(out, "pattern <code>"+esc(pat)+"</code>")
	}
	if f := str(s, "format"); f != "" {
		out = append(out, "format "+esc(f))
	}
	if pn := obj(s, "propertyNames"); pn != nil {
		if v, ok := pn.vals["maxLength"]; ok {
			out = append(out, fmt.Sprintf("keys of at most %v characters", v))
		}
	}
	if ap := obj(s, "additionalProperties"); ap != nil {
		if v, ok := ap.vals["maxLength"]; ok {
			out = append(out, fmt.Sprintf("values of at most %v characters", v))
		}
	}
	if e := asSlice(s.get("enum")); len(e) > 0 {
		var vals []string
		for _, v := range e {
			vals = append(vals, "<code>"+esc(fmt.Sprint(v))+"</code>")
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if d, ok := s.vals["default"]; ok {
		out = append(out, "default <code>"+esc(pretty(d))+"</code>")
	}
	return strings.Join(out, "; ")
}

func plural(n, word string) string {
	if n == "1" {
		return word
	}
	return word + "s"
}

var (
	mdCode = regexp.MustCompile("`([^`]+)`")
	mdBold = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdLink = regexp.MustCompile(`\[([^\]]+)\]\(((?:https?://|#)[^)\s]+)\)`)
)

// mdInline renders the inline Markdown of one paragraph: code spans, bold
// and links (http, https and in-page only). Text is escaped first.
func mdInline(s string) string {
	var codes []string
	s = mdCode.ReplaceAllStringFunc(s, func(m string) string {
		codes = append(codes, "<code>"+esc(m[1:len(m)-1])+"</code>")
		return fmt.Sprintf("\x00%d\x00", len(codes)-1)
	})
	s = esc(s)
	s = mdBold.ReplaceAllString(s, "<strong>$1</strong>")
	s = mdLink.ReplaceAllString(s, `<a href="$2">$1</a>`)
	for i, c := range codes {
		s = strings.Replace(s, fmt.Sprintf("\x00%d\x00", i), c, 1)
	}
	return s
}

// md renders the Markdown subset of the document's descriptions: blocks
// separated by blank lines; "### " headings; lists of "- " items (indented
// lines continue an item); paragraphs.
func md(s string) string {
	var b strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(s), "\n\n") {
		block = strings.TrimRight(block, "\n")
		if block == "" {
			continue
		}
		lines := strings.Split(block, "\n")
		switch {
		case strings.HasPrefix(block, "### "):
			fmt.Fprintf(&b, "<h3>%s</h3>", mdInline(strings.TrimPrefix(lines[0], "### ")))
			if len(lines) > 1 {
				fmt.Fprintf(&b, "<p>%s</p>", mdInline(strings.Join(lines[1:], " ")))
			}
		case strings.HasPrefix(block, "- "):
			var items []string
			for _, l := range lines {
				if strings.HasPrefix(l, "- ") {
					items = append(items, strings.TrimPrefix(l, "- "))
				} else if len(items) > 0 {
					items[len(items)-1] += " " + strings.TrimSpace(l)
				}
			}
			b.WriteString("<ul>")
			for _, it := range items {
				fmt.Fprintf(&b, "<li>%s</li>", mdInline(it))
			}
			b.WriteString("</ul>")
		default:
			fmt.Fprintf(&b, "<p>%s</p>", mdInline(strings.Join(lines, " ")))
		}
	}
	return b.String()
}
