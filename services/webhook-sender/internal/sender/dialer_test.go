package sender

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// testDNS is a DNS server on loopback UDP answering A queries from names;
// the resolver it returns asks only it.
func testDNS(t *testing.T, names map[string]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			hdr, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			name := strings.TrimSuffix(q.Name.String(), ".")
			if ip, ok := names[name]; ok && q.Type == dnsmessage.TypeA && ip.Is4() {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: ip.As4()})
			}
			out, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestDialerRefusesNonPublicAddresses(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	res := testDNS(t, map[string]netip.Addr{
		"loopback.parley.test": netip.MustParseAddr("127.0.0.1"),
		"metadata.parley.test": netip.MustParseAddr("169.254.169.254"),
	})
	post := func(c *http.Client, url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	strict := NewClient(2*time.Second, 4, false, res)
	for _, url := range []string{
		"http://loopback.parley.test:" + port + "/", // a name resolving to 127.0.0.1
		"http://metadata.parley.test:" + port + "/", // a name resolving to the metadata address
		"http://127.0.0.1:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/", "http://0.0.0.0:" + port + "/",
		"http://[fe80::1]/", "http://[::ffff:127.0.0.1]:" + port + "/",
	} {
		err := post(strict, url)
		if !errors.Is(err, ErrDisallowedAddress) {
			t.Errorf("%s: %v, want ErrDisallowedAddress", url, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the server was reached %d times", hits.Load())
	}
	// The operator setting allows them: the name really resolves to the
	// local server, and the guard was the only refusal.
	open := NewClient(2*time.Second, 4, true, res)
	if err := post(open, "http://loopback.parley.test:"+port+"/"); err != nil || hits.Load() != 1 {
		t.Fatalf("with private addresses allowed: %v, hits %d", err, hits.Load())
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	c := NewClient(2*time.Second, 4, true, nil)
	resp, err := c.Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || followed.Load() != 0 {
		t.Fatalf("status %d, target reached %d times", resp.StatusCode, followed.Load())
	}
}

func TestOnlyHTTPSUnlessPrivateAllowed(t *testing.T) {
	for _, c := range []struct {
		url   string
		allow bool
		ok    bool
	}{
		{"https://hooks.example.com/a", false, true},
		{"http://hooks.example.com/a", false, false},
		{"http://127.0.0.1:9090/a", true, true},
		{"ftp://hooks.example.com/a", true, false},
		{"https://user:pw@hooks.example.com/a", false, false},
	} {
		_, err := checkURL(c.url, c.allow)
		if (err == nil) != c.ok {
			t.Errorf("checkURL(%q, %v) = %v", c.url, c.allow, err)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "nope": 0, "-3": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}
