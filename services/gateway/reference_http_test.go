package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/catalog"
)

// TestReferenceThroughHTTP replays the validation reference table
// (internal/validation/testdata/reference.json, made by pydantic) through
// the real gateway over HTTP: the case's Content-Type header (or none), its
// exact body bytes, read by the handlers as a client sends them. A refused
// case must get the reference's status and body byte for byte; an accepted
// one must pass validation and get the use case's answer (the company has
// no campaign, automation or connector: 404; segments are created, 201, or
// found, 409, 200; an empty batch is accepted, 202).
func TestReferenceThroughHTTP(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("internal", "validation", "testdata", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []struct {
			Name        string  `json:"name"`
			Endpoint    string  `json:"endpoint"`
			ContentType *string `json:"content_type"`
			Path        string  `json:"path"`
			Body        *string `json:"body"`
			BodyB64     string  `json:"body_b64"`
			Expect      struct {
				Status int    `json:"status"`
				Body   string `json:"body"`
			} `json:"expect"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) < 400 {
		t.Fatalf("only %d reference cases", len(table.Cases))
	}
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co, err := g.cat.CreateCompany(ctx, catalog.NewCompany{Slug: "ref", Name: "ref", SubscriptionActive: true, Provisioned: true})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := g.keys.Create(ctx, co.ID, apikey.Actor{Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redisClient(t, g)
	paths := map[string]string{"campaign": "/api/campaigns/send", "automation": "/api/automations/send",
		"segment_create": "/api/segments/create", "batch": "/api/batch/send", "connector": "/api/shopify/send"}
	seen := map[int]int{}
	for i, c := range table.Cases {
		body := []byte(nil)
		if c.Body != nil {
			body = []byte(*c.Body)
		} else if body, err = base64.StdEncoding.DecodeString(c.BodyB64); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		path := paths[c.Endpoint]
		if c.Endpoint == "segment_contacts" {
			if c.Path == "" {
				continue // no URL has an empty path segment there: the router answers, not the schema
			}
			path = "/api/segments/" + url.PathEscape(c.Path) + "/contacts"
		}
		if path == "" {
			t.Fatalf("%s: unknown endpoint %q", c.Name, c.Endpoint)
		}
		req, err := http.NewRequest(http.MethodPost, g.url+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("service-api-key", key)
		if c.ContentType == nil || *c.ContentType != "" {
			ct := "application/json"
			if c.ContentType != nil {
				ct = *c.ContentType
			}
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := response{status: resp.StatusCode, header: resp.Header, body: rb}
		seen[r.status]++
		// Every case on a fresh budget: the limits (1 per minute for
		// segment contacts) are not what is tested here.
		if keys, err := rdb.Keys(ctx, g.redis.KeyPrefix+"*").Result(); err != nil {
			t.Fatal(err)
		} else if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		switch want := c.Expect; want.Status {
		case 200:
			// Past validation: the use case's answer (a missing campaign,
			// a segment created or already there, a batch accepted).
			switch r.status {
			case 200, 201, 202, 404, 409:
			default:
				t.Errorf("case %d %s (%s, Content-Type %v): valid body answered %d %s, want the use case's answer", i, c.Name, path, deref(c.ContentType), r.status, r.body)
			}
		default:
			if r.status != want.Status || string(r.body) != want.Body {
				t.Errorf("case %d %s (%s, Content-Type %v):\n got %d %s\nwant %d %s", i, c.Name, path, deref(c.ContentType), r.status, r.body, want.Status, want.Body)
			}
		}
	}
	t.Logf("%d cases replayed over HTTP, statuses %v", len(table.Cases), seen)
}

func deref(s *string) string {
	if s == nil {
		return "(absent)"
	}
	return *s
}
