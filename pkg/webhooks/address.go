package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// MaxURLLength is the longest endpoint URL accepted.
const MaxURLLength = 2048

// Resolver finds a host name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// blocked are the networks an endpoint may not reach unless the operator
// allows private addresses: loopback, private, shared (CGNAT), link-local
// (with the cloud metadata address 169.254.169.254), unspecified, multicast,
// reserved, and IPv6's unique-local, link-local, NAT64 and 6to4 forms of them.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16",
		"fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Disallowed reports whether an endpoint may not be reached at ip: a
// loopback, private, link-local (metadata), multicast or otherwise
// non-public address. The sender checks the address it actually dials with
// it (DNS can change after creation); creation checks what the name resolves
// to then.
func Disallowed(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return true
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// URLError is an endpoint URL refused; its message says why, for the 422.
type URLError struct{ Reason string }

func (e *URLError) Error() string { return e.Reason }

func urlErr(format string, a ...any) error { return &URLError{Reason: fmt.Sprintf(format, a...)} }

// ValidateURL checks an endpoint URL: absolute https (http too when
// allowPrivate), a host, no user info, at most MaxURLLength, and unless
// allowPrivate no literal or resolved address that Disallowed refuses. It
// returns the URL to store (trimmed), or a *URLError.
func ValidateURL(ctx context.Context, raw string, allowPrivate bool, resolver Resolver) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", urlErr("url is required")
	}
	if len(raw) > MaxURLLength {
		return "", urlErr("url is %d characters long, the limit is %d", len(raw), MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", urlErr("url is not a valid URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	case u.Scheme == "http":
		return "", urlErr("url must use https")
	default:
		return "", urlErr("url must be an absolute https URL")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "", urlErr("url must have a host")
	}
	if u.User != nil {
		return "", urlErr("url must not contain a user name or password")
	}
	if u.Fragment != "" {
		return "", urlErr("url must not contain a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := net.LookupPort("tcp", p); err != nil || n < 1 || n > 65535 {
			return "", urlErr("url has an invalid port")
		}
	}
	if allowPrivate {
		return raw, nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if Disallowed(ip) {
			return "", urlErr("url points to a loopback, private, link-local or reserved address (%s)", ip)
		}
		return raw, nil
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return "", urlErr("url points to localhost")
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "", urlErr("url's host %s does not resolve", host)
	}
	for _, ip := range addrs {
		if Disallowed(ip) {
			return "", urlErr("url's host %s resolves to a loopback, private, link-local or reserved address (%s)", host, ip.Unmap())
		}
	}
	return raw, nil
}
