package console

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestRemaining(t *testing.T) {
	cases := map[time.Duration]string{
		24 * time.Hour: "24 h 0 m",
		23*time.Hour + 12*time.Minute + 59*time.Second: "23 h 12 m",
		59*time.Minute + 30*time.Second:                "59 m",
		30 * time.Second:                               "less than a minute",
		0:                                              "now",
		-time.Minute:                                   "now",
	}
	for d, want := range cases {
		if got := remaining(d); got != want {
			t.Errorf("remaining(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	cases := map[string]string{
		"/settings/integrations/credentials": "/settings/integrations/credentials",
		"":                                   PathSends,
		"https://evil.example/":              PathSends,
		"//evil.example/":                    PathSends,
		"/\\evil.example/":                   PathSends,
		"/login":                             PathSends,
	}
	for in, want := range cases {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClientIP(t *testing.T) {
	direct := &Console{}
	proxied := &Console{Deps: Deps{TrustForwardedFor: true}}
	cases := []struct {
		name   string
		c      *Console
		remote string
		xff    []string
		want   string
	}{
		{"remote address", direct, "192.0.2.1:5555", nil, "192.0.2.1"},
		{"forwarded header ignored unless trusted", direct, "192.0.2.1:5555", []string{"203.0.113.7"}, "192.0.2.1"},
		{"last entry of the last header", proxied, "192.0.2.1:5555", []string{"1.1.1.1", "10.0.0.1, 203.0.113.7"}, "203.0.113.7"},
		{"garbage falls back to the remote address", proxied, "[2001:db8::1]:443", []string{"not an address"}, "2001:db8::1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := c.c.clientIP(r).String(); got != c.want {
			t.Errorf("%s: clientIP = %s, want %s", c.name, got, c.want)
		}
	}
}
