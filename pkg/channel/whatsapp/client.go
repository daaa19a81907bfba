package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultBaseURL         = "https://graph.facebook.com"
	DefaultAPIVersion      = "v21.0"
	DefaultTimeout         = 10 * time.Second
	DefaultMaxConnsPerHost = 1024
)

// maxAnswer bounds how much of an answer is read: answers are small, and a
// misbehaving server must not make the client buffer without limit.
const maxAnswer = 1 << 20

// Config is how a Client reaches the Cloud API. The dispatchers fill it
// from their own configuration; zero fields take the defaults.
type Config struct {
	// BaseURL is the Graph API root (provider-sim's address locally).
	BaseURL string
	// APIVersion is the Graph API version in the path, e.g. v21.0.
	APIVersion string
	// Timeout is the deadline of every call, whatever the caller's context
	// allows; the shorter of the two applies.
	Timeout time.Duration
	// MaxConnsPerHost bounds the connections to the provider; idle ones are
	// kept up to the same number, so that ~1000 requests in flight reuse
	// their connections instead of dialling again.
	MaxConnsPerHost int
	// HTTPClient replaces the tuned client (tests that need a special
	// transport); Timeout still applies per call.
	HTTPClient *http.Client
}

// ProviderConfig is how a process reaches the WhatsApp Cloud API (or
// provider-sim on loopback: `make run` points PARLEY_WHATSAPP_BASE_URL at
// it), read from the environment: the dispatchers send through it, the
// admin service and parleyctl manage templates through it.
type ProviderConfig struct {
	BaseURL    string        `env:"PARLEY_WHATSAPP_BASE_URL" envDefault:"https://graph.facebook.com"`
	APIVersion string        `env:"PARLEY_WHATSAPP_API_VERSION" envDefault:"v21.0"`
	Timeout    time.Duration `env:"PARLEY_WHATSAPP_TIMEOUT" envDefault:"10s"`
	// MaxConns bounds the connections to the provider host.
	MaxConns int `env:"PARLEY_WHATSAPP_MAX_CONNS" envDefault:"1024"`
}

// Validate reports every problem at once.
func (c ProviderConfig) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("PARLEY_WHATSAPP_BASE_URL is empty"))
	}
	if c.APIVersion == "" {
		errs = append(errs, errors.New("PARLEY_WHATSAPP_API_VERSION is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("PARLEY_WHATSAPP_TIMEOUT must be positive"))
	}
	if c.MaxConns < 1 {
		errs = append(errs, errors.New("PARLEY_WHATSAPP_MAX_CONNS must be at least 1"))
	}
	return errors.Join(errs...)
}

// NewClient returns the client of this configuration.
func (c ProviderConfig) NewClient() (*Client, error) {
	return NewClient(Config{BaseURL: c.BaseURL, APIVersion: c.APIVersion, Timeout: c.Timeout, MaxConnsPerHost: c.MaxConns})
}

// Client sends template and session messages through the Cloud API. It is
// safe for concurrent use; make one per process and share it.
type Client struct {
	base    string
	version string
	timeout time.Duration
	http    *http.Client
	now     func() time.Time
}

var _ Sender = (*Client)(nil)

// NewClient returns a client with a pooled transport.
func NewClient(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxConnsPerHost <= 0 {
		cfg.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("whatsapp: base URL %q: want http(s)://host", cfg.BaseURL)
	}
	if strings.ContainsAny(cfg.APIVersion, "/?#") {
		return nil, fmt.Errorf("whatsapp: API version %q", cfg.APIVersion)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: NewTransport(cfg.MaxConnsPerHost)}
	}
	return &Client{
		base:    strings.TrimRight(cfg.BaseURL, "/"),
		version: cfg.APIVersion,
		timeout: cfg.Timeout,
		http:    hc,
		now:     time.Now,
	}, nil
}

// NewTransport is the transport the client uses: every connection to the
// one provider host may stay idle for reuse, dials and TLS handshakes are
// bounded, and HTTP/2 is used where the server offers it.
func NewTransport(maxConnsPerHost int) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxConnsPerHost,
		MaxIdleConnsPerHost:   maxConnsPerHost,
		MaxConnsPerHost:       maxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Close releases the idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// sendAnswer is the success answer of a send.
type sendAnswer struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
}

// errorAnswer is the Graph API error shape.
type errorAnswer struct {
	Error *struct {
		Message   string `json:"message"`
		Type      string `json:"type"`
		Code      int    `json:"code"`
		Subcode   int    `json:"error_subcode"`
		ErrorData struct {
			Details string `json:"details"`
		} `json:"error_data"`
		TraceID string `json:"fbtrace_id"`
	} `json:"error"`
}

// SendTemplate renders the message and posts it; it returns the wamid.
// A message that cannot be rendered is a *RenderError and nothing is sent;
// every other failure is an *Error with its Class.
func (c *Client) SendTemplate(ctx context.Context, acct Account, tpl Template, to Recipient, ov Overrides) (string, error) {
	msg, err := BuildTemplateMessage(tpl, to, ov)
	if err != nil {
		return "", err
	}
	if acct.PhoneNumberID == "" || acct.AccessToken == "" {
		return "", &Error{Class: RetryLater, RetryAfter: AccountFloor, Message: "account has no phone number id or access token"}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return "", fmt.Errorf("whatsapp: encode message: %w", err)
	}
	return c.post(ctx, acct, body)
}

// SendSession checks and posts a session message (free-form: text, media,
// interactive, reaction) to to, a number in E.164; it returns the wamid.
// A bad number or a message that breaks the Cloud API's limits is a
// *RenderError (CodeInvalidRecipient, CodeInvalidSession) and nothing is
// sent; every other failure is an *Error with its Class, as for
// SendTemplate. Outside the customer service window Meta accepts the send
// and fails it later with 131047 in a status webhook.
func (c *Client) SendSession(ctx context.Context, acct Account, to string, msg Session) (string, error) {
	m, err := BuildSessionMessage(to, msg)
	if err != nil {
		return "", err
	}
	if acct.PhoneNumberID == "" || acct.AccessToken == "" {
		return "", &Error{Class: RetryLater, RetryAfter: AccountFloor, Message: "account has no phone number id or access token"}
	}
	body, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("whatsapp: encode message: %w", err)
	}
	return c.post(ctx, acct, body)
}

func (c *Client) post(ctx context.Context, acct Account, body []byte) (string, error) {
	endpoint := c.base + "/" + c.version + "/" + url.PathEscape(acct.PhoneNumberID) + "/messages"
	status, raw, err := c.do(ctx, http.MethodPost, endpoint, acct.AccessToken, body)
	if err != nil {
		return "", err
	}
	var ans sendAnswer
	if err := json.Unmarshal(raw, &ans); err != nil || len(ans.Messages) == 0 || ans.Messages[0].ID == "" {
		// The provider may have taken the message; without an id it
		// cannot be tracked, so the caller retries (see Classify).
		return "", &Error{HTTPStatus: status, Class: Retryable, Message: "success answer without a message id"}
	}
	return ans.Messages[0].ID, nil
}

// do makes one Graph API call with the Bearer token, within the client's
// timeout, and returns a 2xx answer's status and body (at most maxAnswer
// bytes); any other answer, or none, is an *Error with its Class.
func (c *Client) do(ctx context.Context, method, endpoint, token string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("whatsapp: build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")

	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, transportError(err, c.timeout)
	}
	defer func() {
		// Drain what is left so that the connection goes back to the pool.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		_ = resp.Body.Close()
	}()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, transportError(err, c.timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return resp.StatusCode, nil, c.answerError(resp, raw)
	}
	return resp.StatusCode, raw, nil
}

// answerError turns a non-2xx answer into an *Error. Only the provider's
// own error fields are kept, never the raw body.
func (c *Client) answerError(resp *http.Response, raw []byte) *Error {
	e := &Error{HTTPStatus: resp.StatusCode}
	var ans errorAnswer
	if json.Unmarshal(raw, &ans) == nil && ans.Error != nil {
		e.Code = ans.Error.Code
		e.Subcode = ans.Error.Subcode
		e.TraceID = clip(ans.Error.TraceID, 64)
		e.Message = clip(ans.Error.ErrorData.Details, 300)
		e.Title = clip(stripCodePrefix(ans.Error.Message), 200)
	}
	class, floor, title := classify(resp.StatusCode, e.Code, e.Subcode)
	e.Class = class
	if e.Title == "" {
		e.Title = title
	}
	if e.Message == "" {
		e.Message = e.Title
	}
	if e.Code == 0 {
		// Not in the Graph error shape (a proxy's 502, say): say so by status.
		e.Message = fmt.Sprintf("HTTP %d %s", resp.StatusCode, e.Title)
	}
	e.RetryAfter = max(parseRetryAfter(resp.Header.Get("Retry-After"), c.now()), floor)
	return e
}

// transportError is a failure without an answer: always Retryable, since the
// provider may not have seen the request. The URL is left out of the
// message (url.Error repeats it).
func transportError(err error, timeout time.Duration) *Error {
	e := &Error{Class: Retryable, Err: err}
	var ue *url.Error
	inner := err
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	switch {
	case errors.Is(err, context.Canceled):
		e.Message = "send cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		e.Message = fmt.Sprintf("no answer within the deadline (timeout %s)", timeout)
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			e.Message = "network timeout: " + inner.Error()
		} else {
			e.Message = "connection: " + inner.Error()
		}
	}
	return e
}

// stripCodePrefix turns "(#131026) Message undeliverable" into the title.
func stripCodePrefix(m string) string {
	if strings.HasPrefix(m, "(#") {
		if i := strings.Index(m, ") "); i > 0 {
			return m[i+2:]
		}
	}
	return m
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
