// Package apidoc is the public API's OpenAPI 3.1 document and its readable
// rendering. The document is written by hand in openapi.yaml (embedded);
// Build completes it with the rate limits of the gateway's route table, so
// that a rate is written in one place only, and renders it as JSON and as a
// self-contained HTML page.
package apidoc

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var source []byte

// Source is the document as written, before Build adds the rate limits.
func Source() []byte { return source }

// Limit is one limited route, as the route table knows it.
type Limit struct {
	// Method and Path as gin registers them ("/api/segments/:segment_id/contacts").
	Method, Path string
	// Name keys the limiter.
	Name string
	// Rate requests per Period, counted per company.
	Rate   int
	Period time.Duration
	// Text is the limit as the 429 body states it: "10 per 1 second".
	Text string
}

// Document is the built document.
type Document struct {
	// JSON is the OpenAPI document.
	JSON []byte
	// HTML is the readable page.
	HTML []byte
	// ETag identifies this build of both.
	ETag string
	// StyleHash is the CSP source of the page's one inline style
	// ("sha256-...").
	StyleHash string
}

// OpenAPIPath turns a gin path into an OpenAPI path: ":segment_id" becomes
// "{segment_id}".
func OpenAPIPath(ginPath string) string {
	parts := strings.Split(ginPath, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") || strings.HasPrefix(p, "*") {
			parts[i] = "{" + p[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

const rateLimitsMarker = "{{rate-limits}}"

// Build completes the document with limits and renders it. It fails when a
// limited route is not in the document, or the document is malformed.
func Build(limits []Limit) (*Document, error) {
	root, err := parse(source)
	if err != nil {
		return nil, err
	}
	info, _ := root.get("info").(*object)
	paths, _ := root.get("paths").(*object)
	if info == nil || paths == nil {
		return nil, errors.New("openapi.yaml: info or paths missing")
	}
	desc, _ := info.get("description").(string)
	if !strings.Contains(desc, rateLimitsMarker) {
		return nil, fmt.Errorf("openapi.yaml: info.description lacks %s", rateLimitsMarker)
	}
	var table strings.Builder
	table.WriteString("Limits per endpoint and company:\n\n")
	for _, l := range limits {
		path := OpenAPIPath(l.Path)
		item, _ := paths.get(path).(*object)
		var op *object
		if item != nil {
			op, _ = item.get(strings.ToLower(l.Method)).(*object)
		}
		if op == nil {
			return nil, fmt.Errorf("openapi.yaml: no %s %s for the limited route %s", l.Method, path, l.Name)
		}
		limitOperation(op, l)
		fmt.Fprintf(&table, "- `%s %s`: %s\n", l.Method, path, phrase(l))
	}
	info.set("description", strings.Replace(desc, rateLimitsMarker, strings.TrimSuffix(table.String(), "\n"), 1))

	var buf bytes.Buffer
	if err := writeJSON(&buf, root, ""); err != nil {
		return nil, err
	}
	doc := &Document{JSON: buf.Bytes()}
	html, style, err := renderHTML(root)
	if err != nil {
		return nil, err
	}
	doc.HTML = html
	sum := sha256.Sum256([]byte(style))
	doc.StyleHash = "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
	tag := sha256.Sum256(append(append([]byte{}, doc.JSON...), doc.HTML...))
	doc.ETag = `"` + base64.RawURLEncoding.EncodeToString(tag[:12]) + `"`
	return doc, nil
}

// phrase is a limit in words: "10 requests per second", "1 request every 10 seconds".
func phrase(l Limit) string {
	req := "requests"
	if l.Rate == 1 {
		req = "request"
	}
	switch {
	case l.Period == time.Second:
		return fmt.Sprintf("%d %s per second", l.Rate, req)
	case l.Period == time.Minute:
		return fmt.Sprintf("%d %s per minute", l.Rate, req)
	case l.Period%time.Second == 0:
		return fmt.Sprintf("%d %s every %d seconds", l.Rate, req, int(l.Period/time.Second))
	}
	return fmt.Sprintf("%d %s per %s", l.Rate, req, l.Period)
}

// limitOperation adds what a limit means for one operation: the
// x-ratelimit extension, a line of description and the 429 response.
func limitOperation(op *object, l Limit) {
	exceeded := "Rate limit exceeded: " + l.Text
	ext := newObject()
	ext.set("requests", l.Rate)
	ext.set("period_seconds", l.Period.Seconds())
	ext.set("per", "company")
	ext.set("description", phrase(l)+" per company")
	ext.set("exceeded", exceeded)
	op.set("x-ratelimit", ext)

	desc, _ := op.get("description").(string)
	op.set("description", fmt.Sprintf("**Rate limit:** %s per company; over it, `429 {\"error\":\"%s\"}`.\n\n%s",
		phrase(l), exceeded, desc))

	responses, _ := op.get("responses").(*object)
	if responses == nil {
		responses = newObject()
		op.set("responses", responses)
	}
	resp := newObject()
	resp.set("description", fmt.Sprintf("Over the rate limit: %s per company. Wait `Retry-After` seconds.", phrase(l)))
	headers := newObject()
	for name, ref := range map[string]string{
		"Retry-After": "RetryAfter", "X-RateLimit-Limit": "RateLimitLimit",
		"X-RateLimit-Remaining": "RateLimitRemaining", "X-RateLimit-Reset": "RateLimitReset",
	} {
		h := newObject()
		h.set("$ref", "#/components/headers/"+ref)
		headers.set(name, h)
	}
	headers.sortKeys()
	resp.set("headers", headers)
	schema := newObject()
	schema.set("$ref", "#/components/schemas/RateLimitError")
	example := newObject()
	example.set("error", exceeded)
	media := newObject()
	media.set("schema", schema)
	media.set("example", example)
	content := newObject()
	content.set("application/json", media)
	resp.set("content", content)
	responses.insertBefore("429", resp, "503")
}

// object is a JSON object that keeps its keys in document order.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) any { return o.vals[k] }

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// insertBefore sets k, placing it before the key before when k is new and
// before exists, else at the end.
func (o *object) insertBefore(k string, v any, before string) {
	if _, ok := o.vals[k]; ok {
		o.vals[k] = v
		return
	}
	o.vals[k] = v
	for i, key := range o.keys {
		if key == before {
			o.keys = append(o.keys[:i], append([]string{k}, o.keys[i:]...)...)
			return
		}
	}
	o.keys = append(o.keys, k)
}

func (o *object) sortKeys() {
	for i := 1; i < len(o.keys); i++ {
		for j := i; j > 0 && o.keys[j] < o.keys[j-1]; j-- {
			o.keys[j], o.keys[j-1] = o.keys[j-1], o.keys[j]
		}
	}
}

// parse reads YAML into objects, slices, strings, json.Numbers, bools and nils.
func parse(src []byte) (*object, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("openapi.yaml: not one document")
	}
	v, err := convert(doc.Content[0])
	if err != nil {
		return nil, err
	}
	root, ok := v.(*object)
	if !ok {
		return nil, errors.New("openapi.yaml: the document is not a mapping")
	}
	return root, nil
}

var yamlInt = regexp.MustCompile(`^[-+]?[0-9]+$`)

func convert(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		o := newObject()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("openapi.yaml line %d: a key that is not a scalar", k.Line)
			}
			if _, dup := o.vals[k.Value]; dup {
				return nil, fmt.Errorf("openapi.yaml line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := convert(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			o.set(k.Value, v)
		}
		return o, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := convert(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool":
			return n.Value == "true", nil
		case "!!int":
			if !yamlInt.MatchString(n.Value) {
				return nil, fmt.Errorf("openapi.yaml line %d: write the integer %q in decimal", n.Line, n.Value)
			}
			return json.Number(strings.TrimPrefix(n.Value, "+")), nil
		case "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("openapi.yaml line %d: %q is not a JSON number", n.Line, n.Value)
			}
			return json.Number(n.Value), nil
		}
		return nil, fmt.Errorf("openapi.yaml line %d: unsupported tag %s", n.Line, n.Tag)
	case yaml.AliasNode:
		return nil, fmt.Errorf("openapi.yaml line %d: anchors and aliases are not used here", n.Line)
	}
	return nil, fmt.Errorf("openapi.yaml line %d: unexpected node", n.Line)
}

// writeJSON writes v indented, keys in order, without HTML escaping.
func writeJSON(b *bytes.Buffer, v any, indent string) error {
	switch v := v.(type) {
	case *object:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteString("{\n")
		for i, k := range v.keys {
			b.WriteString(indent + "  ")
			writeString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, v.vals[k], indent+"  "); err != nil {
				return err
			}
			if i < len(v.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[\n")
		for i, e := range v {
			b.WriteString(indent + "  ")
			if err := writeJSON(b, e, indent+"  "); err != nil {
				return err
			}
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	case string:
		writeString(b, v)
	default:
		out, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("openapi document: %w", err)
		}
		b.Write(out)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}
