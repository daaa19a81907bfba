package webhooks_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// fakeDNS resolves names from a table; other names do not exist.
type fakeDNS map[string][]string

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

var dns = fakeDNS{
	"hooks.example.com":    {"93.184.215.14"},
	"loopback.example.com": {"127.0.0.1"},
	"metadata.example.com": {"169.254.169.254"},
	"private.example.com":  {"93.184.215.14", "10.1.2.3"},
	"v6local.example.com":  {"::1"},
	"mapped.example.com":   {"::ffff:127.0.0.1"},
}

func TestValidateURL(t *testing.T) {
	ctx := context.Background()
	ok := []string{
		"https://hooks.example.com/parley",
		"https://hooks.example.com:8443/a?b=c",
		"  https://hooks.example.com/trimmed  ",
		"https://93.184.215.14/x",
	}
	for _, u := range ok {
		if got, err := webhooks.ValidateURL(ctx, u, false, dns); err != nil || got != strings.TrimSpace(u) {
			t.Errorf("ValidateURL(%q) = %q, %v", u, got, err)
		}
	}
	refused := map[string]string{
		"":                                                       "required",
		"hooks.example.com/x":                                    "absolute https",
		"ftp://hooks.example.com/":                               "absolute https",
		"http://hooks.example.com/":                              "must use https",
		"https:///path":                                          "host",
		"https://user:pw@hooks.example.com/":                     "user name",
		"https://hooks.example.com/#frag":                        "fragment",
		"https://hooks.example.com:99999/":                       "port",
		"https://127.0.0.1/":                                     "loopback",
		"https://[::1]/":                                         "loopback",
		"https://10.0.0.8/":                                      "private",
		"https://192.168.1.1/":                                   "private",
		"https://169.254.169.254/latest/":                        "link-local",
		"https://[fe80::1]/":                                     "link-local",
		"https://[::ffff:127.0.0.1]/":                            "loopback",
		"https://localhost/":                                     "localhost",
		"https://api.localhost/":                                 "localhost",
		"https://loopback.example.com/":                          "resolves to",
		"https://metadata.example.com/":                          "resolves to",
		"https://private.example.com/":                           "resolves to",
		"https://v6local.example.com/":                           "resolves to",
		"https://mapped.example.com/":                            "resolves to",
		"https://nowhere.example.com/":                           "does not resolve",
		"https://hooks.example.com/" + strings.Repeat("a", 2048): "limit is 2048",
	}
	for u, want := range refused {
		_, err := webhooks.ValidateURL(ctx, u, false, dns)
		var ue *webhooks.URLError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, want) {
			t.Errorf("ValidateURL(%q) = %v, want a URLError containing %q", u, err, want)
		}
	}
	// The operator setting lets http and private addresses through (the
	// local test receiver), but not a malformed URL.
	for _, u := range []string{"http://127.0.0.1:7999/hook", "https://loopback.example.com/", "http://localhost/"} {
		if _, err := webhooks.ValidateURL(ctx, u, true, dns); err != nil {
			t.Errorf("ValidateURL(%q, allowPrivate) = %v", u, err)
		}
	}
	if _, err := webhooks.ValidateURL(ctx, "ftp://x/", true, dns); err == nil {
		t.Error("allowPrivate let ftp through")
	}
}

func TestDisallowed(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "127.8.9.1": true, "10.0.0.1": true, "172.16.0.1": true, "172.31.255.255": true,
		"192.168.0.1": true, "169.254.169.254": true, "100.64.0.1": true, "0.0.0.0": true, "224.0.0.1": true,
		"::1": true, "::": true, "fe80::1": true, "fd00:ec2::254": true, "::ffff:10.0.0.1": true, "ff02::1": true,
		"93.184.215.14": false, "8.8.8.8": false, "172.32.0.1": false, "2606:2800:220:1::1": false,
	} {
		if got := webhooks.Disallowed(netip.MustParseAddr(s)); got != want {
			t.Errorf("Disallowed(%s) = %v, want %v", s, got, want)
		}
	}
}
