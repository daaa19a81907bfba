package whatsappsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

const appSecret = "sim-app-secret"

// receiver is the gateway's side of the status webhooks: it verifies the
// signature with the app secret and parses the real payload.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	updates  []whatsapp.StatusUpdate
	inbound  []whatsapp.InboundMessage
	posts    int
	badSigs  atomic.Int64
	failWith atomic.Int64 // HTTP status to answer instead of 200
	raw      []json.RawMessage
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if code := r.failWith.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		if !whatsapp.VerifySignature(appSecret, body, req.Header.Get(whatsapp.SignatureHeader)) {
			r.badSigs.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		wh, err := whatsapp.ParseWebhook(body)
		if err != nil || wh.Malformed != 0 {
			t.Errorf("receiver: %v, %d malformed", err, wh.Malformed)
		}
		r.mu.Lock()
		r.updates = append(r.updates, wh.Statuses...)
		r.inbound = append(r.inbound, wh.Messages...)
		r.posts++
		r.raw = append(r.raw, body)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) snapshot() ([]whatsapp.StatusUpdate, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]whatsapp.StatusUpdate(nil), r.updates...), r.posts
}

// waitFor polls until n statuses arrived or the deadline passes.
func (r *receiver) waitFor(t *testing.T, n int) []whatsapp.StatusUpdate {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ups, _ := r.snapshot()
		if len(ups) >= n {
			return ups
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statuses arrived, want %d", len(ups), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func callbackConfig(url string) whatsappsim.CallbackConfig {
	return whatsappsim.CallbackConfig{CallbackSettings: whatsappsim.CallbackSettings{
		URL: url, AppSecret: appSecret,
		SentDelay: 5 * time.Millisecond, DeliveredDelay: 20 * time.Millisecond, ReadDelay: 20 * time.Millisecond,
	}}
}

func TestUndeliverableGetsASignedFailedCallback(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{
		Faults:    whatsappsim.Faults{Undeliverable: []string{"+39333*", "14155550007"}},
		Callbacks: callbackConfig(rcv.URL),
	}, 5*time.Second)

	byPrefix, err := e.send(whatsapp.Recipient{Phone: "+393331234567"})
	if err != nil {
		t.Fatalf("an undeliverable number is still answered 200: %v", err)
	}
	exact, err := e.send(recipient(7))
	if err != nil {
		t.Fatal(err)
	}
	rcv.waitFor(t, 2)
	time.Sleep(100 * time.Millisecond) // nothing may follow a failed status
	ups, _ := rcv.snapshot()
	if len(ups) != 2 {
		t.Fatalf("statuses = %+v, want exactly the two failed", ups)
	}
	got := map[string]whatsapp.StatusUpdate{}
	for _, u := range ups {
		got[u.MessageID] = u
	}
	for id, to := range map[string]string{byPrefix: "393331234567", exact: "14155550007"} {
		u := got[id]
		if u.Status != whatsapp.StatusFailed || u.RecipientID != to || u.PhoneNumberID != pnid || u.Timestamp.IsZero() ||
			len(u.Errors) != 1 || u.Errors[0].Code != 131026 || u.Errors[0].Title != "Message undeliverable" {
			t.Errorf("status of %s = %+v", id, u)
		}
		if c, _ := whatsapp.ClassifyCode(0, u.Errors[0].Code, 0); c != whatsapp.Permanent {
			t.Errorf("131026 from a webhook classified %v", c)
		}
	}
	if rcv.badSigs.Load() != 0 {
		t.Errorf("%d posts with a bad signature", rcv.badSigs.Load())
	}
	msgs := e.sim.Messages(whatsappsim.Filter{To: "+393331234567"})
	if len(msgs) != 1 || !msgs[0].Undeliverable {
		t.Errorf("recorded = %+v", msgs)
	}
}

func TestStatusesArriveInOrder(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Callbacks: callbackConfig(rcv.URL)}, 5*time.Second)
	const n = 40
	ids := map[string]bool{}
	for i := range n {
		id, err := e.send(recipient(i))
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	ups := rcv.waitFor(t, 3*n)
	seq := map[string][]whatsapp.Status{}
	for _, u := range ups {
		if !ids[u.MessageID] {
			t.Fatalf("status for an unknown id %q", u.MessageID)
		}
		seq[u.MessageID] = append(seq[u.MessageID], u.Status)
	}
	for id, s := range seq {
		if len(s) != 3 || s[0] != whatsapp.StatusSent || s[1] != whatsapp.StatusDelivered || s[2] != whatsapp.StatusRead {
			t.Errorf("%s got %v, want sent, delivered, read", id, s)
		}
	}
	if len(seq) != n {
		t.Errorf("statuses for %d messages, want %d", len(seq), n)
	}
	_, posts := rcv.snapshot()
	st := e.sim.Stats().Callbacks
	if st.Statuses != 3*n || st.Posts != int64(posts) || st.DroppedQueueFull != 0 || st.DroppedGaveUp != 0 {
		t.Errorf("callback stats = %+v (receiver saw %d posts)", st, posts)
	}
	// The webhook body is the real shape, with conversation and pricing on sent.
	var p map[string]any
	rcv.mu.Lock()
	_ = json.Unmarshal(rcv.raw[0], &p)
	rcv.mu.Unlock()
	entry := p["entry"].([]any)[0].(map[string]any)
	change := entry["changes"].([]any)[0].(map[string]any)
	value := change["value"].(map[string]any)
	first := value["statuses"].([]any)[0].(map[string]any)
	if p["object"] != "whatsapp_business_account" || change["field"] != "messages" || value["messaging_product"] != "whatsapp" ||
		first["conversation"] == nil || first["pricing"] == nil {
		t.Errorf("payload shape: %v", p)
	}
}

func TestBatchesSeveralStatusesPerPost(t *testing.T) {
	rcv := newReceiver(t)
	cfg := callbackConfig(rcv.URL)
	cfg.SentDelay = 100 * time.Millisecond // let them pile up, then come due together
	cfg.NoRead = true
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Callbacks: cfg}, 5*time.Second)
	const n = 60
	for i := range n {
		if _, err := e.send(recipient(i)); err != nil {
			t.Fatal(err)
		}
	}
	rcv.waitFor(t, 2*n)
	time.Sleep(100 * time.Millisecond)
	ups, posts := rcv.snapshot()
	if len(ups) != 2*n {
		t.Errorf("%d statuses with read off, want %d (sent and delivered)", len(ups), 2*n)
	}
	for _, u := range ups {
		if u.Status == whatsapp.StatusRead {
			t.Fatal("read status with read receipts off")
		}
	}
	if posts >= 2*n {
		t.Errorf("%d posts for %d statuses: nothing was batched", posts, 2*n)
	}
}

func TestFailingReceiverIsRetriedThenDropped(t *testing.T) {
	rcv := newReceiver(t)
	rcv.failWith.Store(http.StatusInternalServerError)
	cfg := callbackConfig(rcv.URL)
	cfg.MaxAttempts = 2
	e := start(t, whatsappsim.Config{Callbacks: cfg}, 5*time.Second)
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.sim.Stats().Callbacks.DroppedGaveUp == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := e.sim.Stats().Callbacks
	if st.DroppedGaveUp != 1 || st.FailedPosts != 2 || st.Posts != 0 || st.Queued != 0 {
		t.Errorf("callback stats = %+v", st)
	}
}

func TestResetDropsQueuedStatuses(t *testing.T) {
	rcv := newReceiver(t)
	cfg := callbackConfig(rcv.URL)
	cfg.SentDelay = 200 * time.Millisecond
	e := start(t, whatsappsim.Config{Callbacks: cfg}, 5*time.Second)
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatal(err)
	}
	if q := e.sim.Stats().Callbacks.Queued; q != 1 {
		t.Fatalf("queued = %d", q)
	}
	e.sim.Reset() // also turns callbacks back to the configured settings
	time.Sleep(400 * time.Millisecond)
	if ups, _ := rcv.snapshot(); len(ups) != 0 {
		t.Errorf("statuses from before the reset arrived: %+v", ups)
	}
}

func TestCallbacksOffQueueNothing(t *testing.T) {
	e := start(t, whatsappsim.Config{}, 5*time.Second)
	for i := range 10 {
		if _, err := e.send(recipient(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.sim.Stats().Callbacks; st != (whatsappsim.CallbackStats{}) {
		t.Errorf("callbacks off but %+v", st)
	}
}
