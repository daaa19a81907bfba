package sender

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// ErrDisallowedAddress is a connection the sender refused to open: the
// address it would dial is loopback, private, link-local (the cloud
// metadata address among them) or otherwise not public.
var ErrDisallowedAddress = errors.New("address not allowed for webhooks")

// guard is the dialer's Control hook: it runs on the address actually
// dialled, after DNS, for every connection (so a name that resolves
// differently than at creation is still checked).
func guard(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrDisallowedAddress, address)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || webhooks.Disallowed(ip) {
			return fmt.Errorf("%w: %s", ErrDisallowedAddress, host)
		}
		return nil
	}
}

// NewClient is the HTTP client of deliveries: every connection goes through
// the guard (unless allowPrivate), no proxy from the environment (it would
// be the address checked), redirects are not followed (a 3xx is a failed
// attempt), and every attempt is bounded by timeout. resolver may be nil
// (the system's).
func NewClient(timeout time.Duration, perHost int, allowPrivate bool, resolver *net.Resolver) *http.Client {
	d := &net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second,
		Control: guard(allowPrivate), Resolver: resolver}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   min(timeout, 5*time.Second),
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// checkURL refuses what the sender never requests: anything but https
// (http too when private addresses are allowed), and URLs with user info.
func checkURL(raw string, allowPrivate bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("endpoint url: %w", err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return nil, fmt.Errorf("endpoint url scheme %q refused: https only", u.Scheme)
	}
	if u.Host == "" || u.User != nil {
		return nil, errors.New("endpoint url refused: no host, or user info")
	}
	return u, nil
}
