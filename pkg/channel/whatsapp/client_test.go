package whatsapp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

var (
	simpleTpl = whatsapp.Template{Name: "t1", Language: "en_US", BodyParameters: []whatsapp.Binding{{Source: "first_name"}}}
	simpleTo  = whatsapp.Recipient{Phone: "+14155550123", FirstName: "Ann"}
)

// graphError is the Graph API error body for code, as the real API sends it.
func graphError(code, subcode int, typ, message, details string) string {
	sub := ""
	if subcode != 0 {
		sub = fmt.Sprintf(`"error_subcode":%d,`, subcode)
	}
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"code":%d,%s"error_data":{"messaging_product":"whatsapp","details":%q},"fbtrace_id":"A1b2C3"}}`,
		message, typ, code, sub, details)
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		code       int
		class      whatsapp.Class
		wait       time.Duration
		title      string
	}{
		{"throughput 130429", 400, graphError(130429, 0, "OAuthException", "(#130429) Rate limit hit", "Cloud API message throughput has been reached."), "", 130429, whatsapp.Retryable, 0, "Rate limit hit"},
		{"throughput honours Retry-After", 429, graphError(130429, 0, "OAuthException", "(#130429) Rate limit hit", "throughput"), "3", 130429, whatsapp.Retryable, 3 * time.Second, "Rate limit hit"},
		{"pair rate 131056 gets the floor", 400, graphError(131056, 0, "OAuthException", "(#131056) (Business Account, Consumer Account) pair rate limit hit", "Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time."), "5", 131056, whatsapp.RetryLater, whatsapp.PairRateFloor, "(Business Account, Consumer Account) pair rate limit hit"},
		{"pair rate: a longer Retry-After wins", 400, graphError(131056, 0, "OAuthException", "(#131056) pair rate limit hit", "x"), "120", 131056, whatsapp.RetryLater, 120 * time.Second, "pair rate limit hit"},
		{"generic 131000 on 500", 500, graphError(131000, 0, "OAuthException", "(#131000) Something went wrong", "Something went wrong"), "", 131000, whatsapp.Retryable, 0, "Something went wrong"},
		{"service unavailable 131016", 503, graphError(131016, 0, "OAuthException", "(#131016) Service unavailable", "x"), "", 131016, whatsapp.Retryable, 0, "Service unavailable"},
		{"HTML 502 from a proxy", 502, "<html>Bad Gateway</html>", "", 0, whatsapp.Retryable, 0, "Bad Gateway"},
		{"expired token 190 on 401", 401, graphError(190, 463, "OAuthException", "Error validating access token: Session has expired", ""), "", 190, whatsapp.RetryLater, whatsapp.AccountFloor, "Error validating access token: Session has expired"},
		{"401 without the Graph shape", 401, "unauthorised", "", 0, whatsapp.RetryLater, whatsapp.AccountFloor, "Unauthorized"},
		{"permission 2xx-range code", 403, graphError(294, 0, "OAuthException", "(#294) Managing advertisements requires an access token", ""), "", 294, whatsapp.RetryLater, whatsapp.AccountFloor, "Managing advertisements requires an access token"},
		{"undeliverable 131026", 400, graphError(131026, 0, "OAuthException", "(#131026) Message undeliverable", "Message Undeliverable."), "", 131026, whatsapp.Permanent, 0, "Message undeliverable"},
		{"re-engagement 131047", 400, graphError(131047, 0, "OAuthException", "(#131047) Re-engagement message", "More than 24 hours have passed"), "", 131047, whatsapp.Permanent, 0, "Re-engagement message"},
		{"Meta chose not to deliver 131049", 400, graphError(131049, 0, "OAuthException", "(#131049) This message was not delivered to maintain healthy ecosystem engagement.", "x"), "", 131049, whatsapp.Permanent, 0, "This message was not delivered to maintain healthy ecosystem engagement."},
		{"param count 132000", 400, graphError(132000, 0, "OAuthException", "(#132000) Number of parameters does not match the expected number of params", "body: number of localizable_params (1) does not match the expected number of params (2)"), "", 132000, whatsapp.Permanent, 0, "Number of parameters does not match the expected number of params"},
		{"template missing 132001", 404, graphError(132001, 0, "OAuthException", "(#132001) Template name does not exist in the translation", "template name (t1) does not exist in en_US"), "", 132001, whatsapp.Permanent, 0, "Template name does not exist in the translation"},
		{"invalid parameter 100", 400, graphError(100, 0, "OAuthException", "(#100) Invalid parameter", "x"), "", 100, whatsapp.Permanent, 0, "Invalid parameter"},
		{"unknown phone number id 100/33", 400, graphError(100, 33, "GraphMethodException", "Unsupported post request. Object with ID '1234567890' does not exist", ""), "", 100, whatsapp.RetryLater, whatsapp.AccountFloor, "Unsupported post request. Object with ID '1234567890' does not exist"},
		{"parameter not valid 131009", 400, graphError(131009, 0, "OAuthException", "(#131009) Parameter value is not valid", "x"), "", 131009, whatsapp.Permanent, 0, "Parameter value is not valid"},
		{"required parameter 131008", 400, graphError(131008, 0, "OAuthException", "(#131008) Required parameter is missing", "Parameter of type text is missing text value"), "", 131008, whatsapp.Permanent, 0, "Required parameter is missing"},
		{"unknown code on 400", 400, graphError(999999, 0, "OAuthException", "(#999999) Something new", ""), "", 999999, whatsapp.Permanent, 0, "Something new"},
		{"unknown code on 500", 500, graphError(999998, 0, "OAuthException", "(#999998) Something new", ""), "", 999998, whatsapp.Retryable, 0, "Something new"},
		{"locked account 131031", 403, graphError(131031, 0, "OAuthException", "(#131031) Account has been locked", ""), "", 131031, whatsapp.RetryLater, whatsapp.AccountFloor, "Account has been locked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			cl := newClient(t, srv.URL, 5*time.Second)
			id, err := cl.SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{})
			var pe *whatsapp.Error
			if id != "" || !errors.As(err, &pe) {
				t.Fatalf("got (%q, %v), want an *Error", id, err)
			}
			if pe.Code != tt.code || pe.HTTPStatus != tt.status || pe.Class != tt.class || pe.RetryAfter != tt.wait || pe.Title != tt.title {
				t.Errorf("got code %d status %d class %v wait %v title %q; want %d %d %v %v %q",
					pe.Code, pe.HTTPStatus, pe.Class, pe.RetryAfter, pe.Title, tt.code, tt.status, tt.class, tt.wait, tt.title)
			}
			if whatsapp.Classify(err) != tt.class {
				t.Errorf("Classify = %v, want %v", whatsapp.Classify(err), tt.class)
			}
			if tt.code != 0 && pe.TraceID != "A1b2C3" {
				t.Errorf("TraceID = %q", pe.TraceID)
			}
			if strings.Contains(err.Error(), "Ann") || strings.Contains(err.Error(), "4155550123") || strings.Contains(err.Error(), acct.AccessToken) {
				t.Errorf("error carries personal data or the token: %v", err)
			}
		})
	}
}

func TestClassifyCodeTable(t *testing.T) {
	for _, tt := range []struct {
		code  int
		sub   int
		class whatsapp.Class
		floor time.Duration
	}{
		{130429, 0, whatsapp.Retryable, 0},
		{131056, 0, whatsapp.RetryLater, whatsapp.PairRateFloor},
		{190, 0, whatsapp.RetryLater, whatsapp.AccountFloor},
		{131026, 0, whatsapp.Permanent, 0},
		{131047, 0, whatsapp.Permanent, 0},
		{131049, 0, whatsapp.Permanent, 0},
		{132000, 0, whatsapp.Permanent, 0},
		{132001, 0, whatsapp.Permanent, 0},
		{100, 0, whatsapp.Permanent, 0},
		{131009, 0, whatsapp.Permanent, 0},
		{131008, 0, whatsapp.Permanent, 0},
		{100, 33, whatsapp.RetryLater, whatsapp.AccountFloor},
		{250, 0, whatsapp.RetryLater, whatsapp.AccountFloor},
		{999999, 0, whatsapp.Permanent, 0}, // unknown code from a status webhook
	} {
		c, f := whatsapp.ClassifyCode(0, tt.code, tt.sub)
		if c != tt.class || f != tt.floor {
			t.Errorf("ClassifyCode(%d) = %v %v, want %v %v", tt.code, c, f, tt.class, tt.floor)
		}
	}
}

func TestHTTPDateRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL, 5*time.Second).SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{})
	var pe *whatsapp.Error
	if !errors.As(err, &pe) || pe.Class != whatsapp.Retryable || pe.RetryAfter < 25*time.Second || pe.RetryAfter > 31*time.Second {
		t.Fatalf("err = %#v, want Retryable with ~30s", err)
	}
}

func TestSuccessWithoutIDIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"messaging_product":"whatsapp","contacts":[],"messages":[]}`)
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL, 5*time.Second).SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{})
	if whatsapp.Classify(err) != whatsapp.Retryable {
		t.Fatalf("err = %v, want Retryable", err)
	}
}

func TestDeadlineOnEveryCall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	cl := newClient(t, srv.URL, 200*time.Millisecond)

	// The caller's context has no deadline: the client's own applies.
	done := make(chan error, 1)
	go func() {
		_, err := cl.SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{})
		done <- err
	}()
	select {
	case err := <-done:
		var pe *whatsapp.Error
		if !errors.As(err, &pe) || pe.Class != whatsapp.Retryable || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want a Retryable deadline error", err)
		}
		if strings.Contains(err.Error(), srv.URL) {
			t.Errorf("error repeats the URL: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not give up: no deadline")
	}

	// The caller's cancellation is told apart from a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := cl.SendTemplate(ctx, acct, simpleTpl, simpleTo, whatsapp.Overrides{})
	if !errors.Is(err, context.Canceled) || whatsapp.Classify(err) != whatsapp.Retryable {
		t.Fatalf("err = %v, want Retryable wrapping context.Canceled", err)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = newClient(t, "http://"+addr, 2*time.Second).SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{})
	var pe *whatsapp.Error
	if !errors.As(err, &pe) || pe.Class != whatsapp.Retryable || pe.Code != 0 || !strings.Contains(pe.Message, "connection") {
		t.Fatalf("err = %v, want a Retryable connection error", err)
	}
}

func TestMissingAccountIsAnAccountProblem(t *testing.T) {
	cl := newClient(t, "http://127.0.0.1:1", time.Second)
	_, err := cl.SendTemplate(context.Background(), whatsapp.Account{PhoneNumberID: "1"}, simpleTpl, simpleTo, whatsapp.Overrides{})
	var pe *whatsapp.Error
	if !errors.As(err, &pe) || pe.Class != whatsapp.RetryLater || pe.RetryAfter != whatsapp.AccountFloor {
		t.Fatalf("err = %v, want RetryLater with the account floor", err)
	}
}

// TestConnectionsArePooled sends two rounds of concurrent requests: the
// second must reuse the first round's connections (a default transport
// keeps only two idle connections per host and would dial again).
func TestConnectionsArePooled(t *testing.T) {
	const inFlight = 100
	var newConns atomic.Int64
	var arrived sync.WaitGroup
	var gate atomic.Pointer[chan struct{}]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		g := *gate.Load()
		arrived.Done()
		<-g
		_, _ = io.WriteString(w, `{"messaging_product":"whatsapp","messages":[{"id":"wamid.x"}]}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cl := newClient(t, srv.URL, 10*time.Second)

	round := func() {
		g := make(chan struct{})
		gate.Store(&g)
		arrived.Add(inFlight)
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				if _, err := cl.SendTemplate(context.Background(), acct, simpleTpl, simpleTo, whatsapp.Overrides{}); err != nil {
					t.Error(err)
				}
			})
		}
		arrived.Wait() // all in flight at once
		close(g)
		wg.Wait()
	}
	round()
	first := newConns.Load()
	round()
	if first != inFlight {
		t.Errorf("first round opened %d connections, want %d", first, inFlight)
	}
	if again := newConns.Load() - first; again != 0 {
		t.Errorf("second round opened %d new connections, want 0 (pool reuse)", again)
	}
}

func TestNewClientRejectsBadConfig(t *testing.T) {
	for _, c := range []whatsapp.Config{{BaseURL: "ftp://x"}, {BaseURL: "http://"}, {BaseURL: "http://x", APIVersion: "v1/../x"}} {
		if _, err := whatsapp.NewClient(c); err == nil {
			t.Errorf("NewClient(%+v) accepted", c)
		}
	}
}
