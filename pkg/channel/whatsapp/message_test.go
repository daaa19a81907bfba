package whatsapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// cloudAPI is an httptest server that speaks the Cloud API's send endpoint:
// it checks the path, method and headers, keeps the last body, and answers
// the real success shape.
type cloudAPI struct {
	*httptest.Server
	t     *testing.T
	mu    sync.Mutex
	body  []byte
	token string
}

func newCloudAPI(t *testing.T, token string) *cloudAPI {
	t.Helper()
	c := &cloudAPI{t: t, token: token}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v21.0/1234567890/messages" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+c.token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Invalid OAuth access token - Cannot parse access token","type":"OAuthException","code":190,"fbtrace_id":"AbC"}}`)
			return
		}
		if r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "content type", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.body = b
		c.mu.Unlock()
		var m whatsapp.TemplateMessage
		_ = json.Unmarshal(b, &m)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"messaging_product":"whatsapp","contacts":[{"input":"`+m.To+`","wa_id":"`+m.To+`"}],"messages":[{"id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3`+m.To+`","message_status":"accepted"}]}`)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *cloudAPI) lastBody() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body
}

func newClient(t *testing.T, base string, timeout time.Duration) *whatsapp.Client {
	t.Helper()
	cl, err := whatsapp.NewClient(whatsapp.Config{BaseURL: base, APIVersion: "v21.0", Timeout: timeout})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var acct = whatsapp.Account{PhoneNumberID: "1234567890", AccessToken: "EAAG-test-token"}

func TestSendTemplateRendersGolden(t *testing.T) {
	api := newCloudAPI(t, acct.AccessToken)
	cl := newClient(t, api.URL, 5*time.Second)

	tests := []struct {
		name   string
		golden string
		tpl    whatsapp.Template
		to     whatsapp.Recipient
		ov     whatsapp.Overrides
	}{
		{
			name:   "image header: contact media wins; every binding; both buttons",
			golden: "image_header_full.json",
			tpl: whatsapp.Template{
				Name: "order_shipped", Language: "it_IT",
				HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/default.jpg",
				BodyParameters: []whatsapp.Binding{
					{Source: "first_name", Default: "cliente"},
					{Source: "last_name"},
					{Source: "phone"},
					{Source: "variable", Name: "order_id"},
					{Source: "literal", Value: "Shop Example"},
				},
				URLButtons: []whatsapp.URLButton{
					{Base: "https://shop.example/", DefaultSuffix: "orders"},
					{Base: "https://shop.example/help/", DefaultSuffix: "faq"},
				},
			},
			to: whatsapp.Recipient{
				Phone: "+393331234567", FirstName: "Giulia", LastName: "Rossi",
				Variables: map[string]string{"order_id": "A-1009"},
				ImageURL:  "https://cdn.example/contact.jpg",
			},
			ov: whatsapp.Overrides{
				ImageURL: "https://cdn.example/request.jpg",
				// Starts with button 0's base: only the rest is sent.
				URL: "https://shop.example/track/A-1009",
				// Does not start with button 1's base: sent whole.
				URL2: "https://other.example/help",
			},
		},
		{
			name:   "video header: request override wins over template default; default for empty name",
			golden: "video_header_override.json",
			tpl: whatsapp.Template{
				Name: "spring_sale", Language: "en_US",
				HeaderKind: whatsapp.HeaderVideo, HeaderMediaURL: "https://cdn.example/default.mp4",
				BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}},
			},
			// The contact's image does not apply to a video header.
			to: whatsapp.Recipient{Phone: "14155550123", ImageURL: "https://cdn.example/contact.jpg"},
			ov: whatsapp.Overrides{VideoURL: "https://cdn.example/request.mp4", ImageURL: "https://cdn.example/request.jpg"},
		},
		{
			name:   "text header; blank and missing values take defaults; default button suffix",
			golden: "text_header_defaults.json",
			tpl: whatsapp.Template{
				Name: "welcome_back", Language: "en_GB",
				HeaderKind: whatsapp.HeaderText, HeaderText: "Spring offers",
				BodyParameters: []whatsapp.Binding{
					{Source: "first_name", Default: "friend"},
					{Source: "variable", Name: "code", Default: "SPRING10"},
				},
				URLButtons: []whatsapp.URLButton{{Base: "https://shop.example/", DefaultSuffix: "spring?src=wa"}},
			},
			to: whatsapp.Recipient{Phone: "+447700900123", FirstName: "  ", Variables: map[string]string{"code": ""}},
		},
		{
			name:   "image header from the template default",
			golden: "image_header_template_default.json",
			tpl: whatsapp.Template{
				Name: "catalogue", Language: "pt_BR",
				HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/default.png",
			},
			to: whatsapp.Recipient{Phone: "+5511987654321"},
		},
		{
			name:   "static text header, no parameters: no components; language defaults to en_US",
			golden: "no_components.json",
			tpl:    whatsapp.Template{Name: "hello_world", HeaderKind: whatsapp.HeaderText},
			to:     whatsapp.Recipient{Phone: "+4915112345678"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := cl.SendTemplate(context.Background(), acct, tt.tpl, tt.to, tt.ov)
			if err != nil {
				t.Fatalf("SendTemplate: %v", err)
			}
			want := readGolden(t, tt.golden)
			if !strings.HasPrefix(id, "wamid.") || !strings.HasSuffix(id, want["to"].(string)) {
				t.Errorf("id = %q, want the wamid the server gave for this recipient", id)
			}
			var got map[string]any
			if err := json.Unmarshal(api.lastBody(), &got); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				w, _ := json.MarshalIndent(want, "", "  ")
				t.Errorf("body differs from %s\n got: %s\nwant: %s", tt.golden, g, w)
			}
			// The exported renderer is what went on the wire.
			msg, err := whatsapp.BuildTemplateMessage(tt.tpl, tt.to, tt.ov)
			if err != nil {
				t.Fatalf("BuildTemplateMessage: %v", err)
			}
			b, _ := json.Marshal(msg)
			if string(b) != string(api.lastBody()) {
				t.Errorf("BuildTemplateMessage = %s, sent %s", b, api.lastBody())
			}
		})
	}
}

func readGolden(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestRenderErrorsAreFoundBeforeSending(t *testing.T) {
	api := newCloudAPI(t, acct.AccessToken)
	cl := newClient(t, api.URL, 5*time.Second)
	base := whatsapp.Template{Name: "t1", Language: "en_US"}
	to := whatsapp.Recipient{Phone: "+14155550123", FirstName: "Ann"}

	tests := []struct {
		name string
		tpl  func(whatsapp.Template) whatsapp.Template
		to   whatsapp.Recipient
		part string
	}{
		{"empty binding without default", func(t whatsapp.Template) whatsapp.Template {
			t.BodyParameters = []whatsapp.Binding{{Source: "first_name"}, {Source: "last_name"}}
			return t
		}, to, "body parameter 2 (last_name)"},
		{"missing variable without default", func(t whatsapp.Template) whatsapp.Template {
			t.BodyParameters = []whatsapp.Binding{{Source: "variable", Name: "order_id"}}
			return t
		}, to, "body parameter 1 (variable order_id)"},
		{"unknown source", func(t whatsapp.Template) whatsapp.Template {
			t.BodyParameters = []whatsapp.Binding{{Source: "email"}}
			return t
		}, to, "body parameter 1 (email)"},
		{"image header without any link", func(t whatsapp.Template) whatsapp.Template {
			t.HeaderKind = whatsapp.HeaderImage
			return t
		}, to, "image header"},
		{"video header without any link", func(t whatsapp.Template) whatsapp.Template {
			t.HeaderKind = whatsapp.HeaderVideo
			return t
		}, to, "video header"},
		{"unknown header kind", func(t whatsapp.Template) whatsapp.Template {
			t.HeaderKind = "document"
			return t
		}, to, "header"},
		{"button without suffix", func(t whatsapp.Template) whatsapp.Template {
			t.URLButtons = []whatsapp.URLButton{{Base: "https://x.example/", DefaultSuffix: "a"}, {Base: "https://x.example/b/"}}
			return t
		}, to, "URL button 1"},
		{"three buttons", func(t whatsapp.Template) whatsapp.Template {
			t.URLButtons = make([]whatsapp.URLButton, 3)
			return t
		}, to, "buttons"},
		{"no template name", func(t whatsapp.Template) whatsapp.Template {
			t.Name = ""
			return t
		}, to, "template"},
		{"bad phone", func(t whatsapp.Template) whatsapp.Template { return t }, whatsapp.Recipient{Phone: "+0123"}, "recipient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := api.lastBody()
			_, err := cl.SendTemplate(context.Background(), acct, tt.tpl(base), tt.to, whatsapp.Overrides{})
			var re *whatsapp.RenderError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RenderError", err)
			}
			if re.Part != tt.part {
				t.Errorf("Part = %q, want %q", re.Part, tt.part)
			}
			if !errors.Is(err, whatsapp.ErrInvalidMessage) || whatsapp.Classify(err) != whatsapp.Permanent {
				t.Errorf("want ErrInvalidMessage and Permanent, got %v / %v", err, whatsapp.Classify(err))
			}
			if strings.Contains(err.Error(), "Ann") || strings.Contains(err.Error(), "14155550123") {
				t.Errorf("error leaks personal data: %v", err)
			}
			if string(api.lastBody()) != string(before) {
				t.Error("a request reached the provider")
			}
		})
	}
}
