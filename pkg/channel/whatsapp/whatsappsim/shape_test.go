package whatsappsim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// post sends a raw body as the Cloud API's clients do.
func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("answer is not JSON: %s", raw)
	}
	return resp.StatusCode, m
}

const good = `{"messaging_product":"whatsapp","recipient_type":"individual","to":"14155550123","type":"template",
 "template":{"name":"t1","language":{"code":"en_US"},"components":[
  {"type":"header","parameters":[{"type":"image","image":{"link":"https://cdn.example/a.jpg"}}]},
  {"type":"body","parameters":[{"type":"text","text":"Ann"}]},
  {"type":"button","sub_type":"url","index":"0","parameters":[{"type":"text","text":"x"}]}]}}`

func TestShapeErrors(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000}, 5*time.Second)
	url := e.srv.URL + "/v21.0/" + pnid + "/messages"

	status, ok := post(t, url, good)
	if status != 200 {
		t.Fatalf("good body: %d %v", status, ok)
	}
	msgs := ok["messages"].([]any)
	contacts := ok["contacts"].([]any)
	if ok["messaging_product"] != "whatsapp" || !strings.HasPrefix(msgs[0].(map[string]any)["id"].(string), "wamid.") ||
		contacts[0].(map[string]any)["wa_id"] != "14155550123" || contacts[0].(map[string]any)["input"] != "14155550123" {
		t.Errorf("success answer: %v", ok)
	}

	repl := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the good body", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct {
		name   string
		body   string
		status int
		code   float64
	}{
		{"not JSON", `{"messaging_product":`, 400, 100},
		{"no messaging_product", repl(`"messaging_product":"whatsapp",`, ""), 400, 100},
		{"wrong messaging_product", repl(`"messaging_product":"whatsapp"`, `"messaging_product":"sms"`), 400, 100},
		{"wrong recipient_type", repl(`"individual"`, `"broadcast"`), 400, 100},
		{"no to", repl(`"to":"14155550123",`, ""), 400, 100},
		{"to with letters", repl(`"14155550123"`, `"1415555abcd"`), 400, 100},
		{"to too short", repl(`"14155550123"`, `"12345"`), 400, 100},
		{"to as a number", repl(`"14155550123"`, `14155550123`), 400, 100},
		{"unknown type", repl(`"type":"template"`, `"type":"location"`), 400, 100},
		{"session type without its object", repl(`"type":"template"`, `"type":"text"`), 400, 131008},
		{"no template name", repl(`"name":"t1",`, ""), 400, 100},
		{"no language code", repl(`{"code":"en_US"}`, `{}`), 400, 100},
		{"components not an array", repl(`"components":[`, `"components":{"x":[`) + "}", 400, 100},
		{"unknown component type", repl(`{"type":"body"`, `{"type":"footer"`), 400, 100},
		{"empty text", repl(`"text":"Ann"`, `"text":""`), 400, 131008},
		{"image without link", repl(`{"link":"https://cdn.example/a.jpg"}`, `{}`), 400, 131008},
		{"image link not http", repl(`https://cdn.example/a.jpg`, `ftp://cdn.example/a.jpg`), 400, 131009},
		{"button without sub_type", repl(`"sub_type":"url",`, ""), 400, 100},
		{"button index not a digit", repl(`"index":"0"`, `"index":"a"`), 400, 100},
		{"button without parameter", repl(`"parameters":[{"type":"text","text":"x"}]`, `"parameters":[]`), 400, 131008},
		{"parameter of unknown type", repl(`{"type":"text","text":"Ann"}`, `{"type":"currency"}`), 400, 100},
		{"huge body", repl(`"Ann"`, `"`+strings.Repeat("a", 70_000)+`"`), 400, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ans := post(t, url, tt.body)
			errObj, _ := ans["error"].(map[string]any)
			if status != tt.status || errObj == nil || errObj["code"] != tt.code {
				t.Fatalf("got %d %v, want %d with code %v", status, ans, tt.status, tt.code)
			}
			if msg, _ := errObj["message"].(string); msg == "" || errObj["type"] != "OAuthException" || errObj["fbtrace_id"] == "" {
				t.Errorf("not the Graph error shape: %v", ans)
			}
		})
	}
	if st := e.sim.Stats(); st.Accepted != 1 || st.Requests != int64(len(tests)+1) {
		t.Errorf("stats = %+v", st)
	}
	status, _ = post(t, e.srv.URL+"/21/"+pnid+"/messages", good)
	if status != 400 {
		t.Errorf("a path without a version: %d", status)
	}
}

func TestRegisteredTemplatesAreEnforced(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000}, 5*time.Second)
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "order_update", Language: "en_US", Header: whatsapp.HeaderImage, BodyParameters: 2, URLButtons: 1}); err != nil {
		t.Fatal(err)
	}
	send := func(tp whatsapp.Template) error {
		_, err := e.cl.SendTemplate(context.Background(), acct, tp, recipient(1), whatsapp.Overrides{})
		return err
	}
	if err := send(tpl); err != nil {
		t.Fatalf("the registered shape: %v", err)
	}
	variant := func(f func(*whatsapp.Template)) whatsapp.Template {
		v := tpl
		v.BodyParameters = append([]whatsapp.Binding(nil), tpl.BodyParameters...)
		f(&v)
		return v
	}
	for _, c := range []struct {
		name   string
		tpl    whatsapp.Template
		status int
		code   int
	}{
		{"unknown name", variant(func(v *whatsapp.Template) { v.Name = "nope" }), 404, 132001},
		{"unknown language", variant(func(v *whatsapp.Template) { v.Language = "it_IT" }), 404, 132001},
		{"one body parameter short", variant(func(v *whatsapp.Template) { v.BodyParameters = v.BodyParameters[:1] }), 400, 132000},
		{"a video for an image header", variant(func(v *whatsapp.Template) { v.HeaderKind = whatsapp.HeaderVideo }), 400, 132012},
		{"no header", variant(func(v *whatsapp.Template) { v.HeaderKind = whatsapp.HeaderNone }), 400, 131008},
		{"no button", variant(func(v *whatsapp.Template) { v.URLButtons = nil }), 400, 132000},
	} {
		pe := providerError(t, send(c.tpl))
		if pe.HTTPStatus != c.status || pe.Code != c.code || pe.Class != whatsapp.Permanent {
			t.Errorf("%s: %+v, want %d/%d Permanent", c.name, pe, c.status, c.code)
		}
	}
}
