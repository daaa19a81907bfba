package statuses_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/gateway/internal/statuses"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is the record on a fresh database, with each group's size noted:
// the groups are applied for real.
type store struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	// sizes are the statuses of each call, in order.
	sizes []int
}

func (s *store) ApplyStatuses(ctx context.Context, updates []whatsapp.StatusUpdate) error {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(updates))
	s.mu.Unlock()
	_, err := record.ApplyStatuses(ctx, s.pool, updates, time.Now())
	return err
}

func (s *store) groups() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

// env is a database with n sent messages, wamids "wamid.<i>", and an
// Applier on it.
type env struct {
	t     *testing.T
	store *store
	a     *statuses.Applier
	stop  func()
}

func newEnv(t *testing.T, n int, o statuses.Options) *env {
	t.Helper()
	_, pool := storetest.NewDatabase(t)
	ctx := context.Background()
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name, subscription_active, provisioned)
		VALUES ('acme', 'Acme', true, true) RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		WITH b AS (
			INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at, created_at)
			VALUES (gen_random_uuid(), $1, 'batch', 'api:messages_batch', $2, 'completed', now(), now()) RETURNING id, created_at)
		INSERT INTO messages (batch_id, seq, company_id, phone, state, lane, attempts, created_at, updated_at, sent_at, provider_message_id)
		SELECT b.id, g, $1, '+1555' || lpad(g::text, 8, '0'), 'sent', 'campaign', 1, b.created_at, now(), now(), 'wamid.' || g
		FROM b, generate_series(0, $2 - 1) g`, company, n); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: &store{pool: pool}}
	e.a = statuses.New(e.store, o)
	e.start()
	return e
}

func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.a.Run(ctx)
	}()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(e.stop)
}

// waitQueued waits until n statuses wait for a group
// (parley_gateway_status_queued).
func (e *env) waitQueued(n float64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(e.a.Collectors()[3]) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%v statuses queued after 10s, want %v", testutil.ToFloat64(e.a.Collectors()[3]), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statuses are st for the wamids of messages [from, from+n).
func statusesOf(st whatsapp.Status, from, n int) []whatsapp.StatusUpdate {
	out := make([]whatsapp.StatusUpdate, n)
	for i := range out {
		out[i] = whatsapp.StatusUpdate{MessageID: fmt.Sprintf("wamid.%d", from+i), Status: st, Timestamp: time.Now()}
	}
	return out
}

// applyAll applies each POST's statuses from its own goroutine, all at
// once, and returns their answers.
func (e *env) applyAll(ctx context.Context, posts [][]whatsapp.StatusUpdate) []error {
	errs := make([]error, len(posts))
	var wg sync.WaitGroup
	for i, p := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.a.Apply(ctx, p)
		}()
	}
	wg.Wait()
	return errs
}

// count is how many messages are in state.
func (e *env) count(state string) int {
	e.t.Helper()
	var n int
	if err := e.store.pool.QueryRow(context.Background(), `SELECT count(*) FROM messages WHERE state = $1::message_state`,
		state).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestConcurrentPostsShareTransactions: 40 POSTs at once are applied in a
// few groups, each one call of the record, each POST whole in one, none
// over the size; every status is applied.
func TestConcurrentPostsShareTransactions(t *testing.T) {
	e := newEnv(t, 400, statuses.Options{MaxStatuses: 100, Wait: 50 * time.Millisecond, Appliers: 2})
	var posts [][]whatsapp.StatusUpdate
	for i := range 40 {
		posts = append(posts, statusesOf(whatsapp.StatusDelivered, i*10, 10))
	}
	for i, err := range e.applyAll(context.Background(), posts) {
		if err != nil {
			t.Errorf("POST %d: %v", i, err)
		}
	}
	groups := e.store.groups()
	total := 0
	for _, n := range groups {
		total += n
		if n > 100 || n%10 != 0 {
			t.Errorf("a group of %d statuses: want at most 100, whole POSTs of 10", n)
		}
	}
	if total != 400 || len(groups) > 8 {
		t.Errorf("groups %v: %d statuses in %d transactions, want 400 in at most 8", groups, total, len(groups))
	}
	if n := e.count("delivered"); n != 400 {
		t.Errorf("%d messages delivered, want 400", n)
	}
	if got := testutil.ToFloat64(e.a.Collectors()[1]); got != float64(len(groups)) {
		t.Errorf("groups_total %v, want %d", got, len(groups))
	}
}

// TestLargePostIsAGroupOfItsOwn: a POST over MaxStatuses is never split.
func TestLargePostIsAGroupOfItsOwn(t *testing.T) {
	e := newEnv(t, 100, statuses.Options{MaxStatuses: 20, Wait: 0, Appliers: 1})
	if err := e.a.Apply(context.Background(), statusesOf(whatsapp.StatusRead, 0, 60)); err != nil {
		t.Fatal(err)
	}
	if g := e.store.groups(); len(g) != 1 || g[0] != 60 {
		t.Errorf("groups %v, want one of 60", g)
	}
}

// TestFailedGroupFailsEveryPost: a group the record refuses (here a
// trigger refuses one message's update) answers every POST in it with
// ErrUnavailable, and none of its statuses is applied; the next group is
// applied.
func TestFailedGroupFailsEveryPost(t *testing.T) {
	e := newEnv(t, 100, statuses.Options{MaxStatuses: 1000, Wait: 100 * time.Millisecond, Appliers: 1})
	if _, err := e.store.pool.Exec(context.Background(), `
		CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'test: refused'; END $$;
		CREATE TRIGGER test_refuse BEFORE UPDATE ON messages
			FOR EACH ROW WHEN (NEW.provider_message_id = 'wamid.7') EXECUTE FUNCTION test_refuse();`); err != nil {
		t.Fatal(err)
	}
	posts := [][]whatsapp.StatusUpdate{statusesOf(whatsapp.StatusDelivered, 0, 5), statusesOf(whatsapp.StatusDelivered, 5, 5),
		statusesOf(whatsapp.StatusDelivered, 10, 5)}
	errs := e.applyAll(context.Background(), posts)
	for i, err := range errs {
		if !errors.Is(err, statuses.ErrUnavailable) {
			t.Errorf("POST %d of a failed group: %v, want ErrUnavailable", i, err)
		}
	}
	if g := e.store.groups(); len(g) != 1 {
		t.Errorf("groups %v, want the three POSTs in one", g)
	}
	if n := e.count("delivered"); n != 0 {
		t.Errorf("%d messages delivered by a failed group, want 0", n)
	}
	if err := e.a.Apply(context.Background(), statusesOf(whatsapp.StatusDelivered, 20, 5)); err != nil {
		t.Errorf("the next group: %v", err)
	}
	if n := e.count("delivered"); n != 5 {
		t.Errorf("%d messages delivered, want 5", n)
	}
}

// TestStopAppliesWhatIsQueued: POSTs waiting for their group when the
// Applier stops are applied and answered; a POST after that is refused.
func TestStopAppliesWhatIsQueued(t *testing.T) {
	e := newEnv(t, 100, statuses.Options{MaxStatuses: 1000, Wait: time.Hour, Appliers: 2})
	posts := [][]whatsapp.StatusUpdate{statusesOf(whatsapp.StatusRead, 0, 10), statusesOf(whatsapp.StatusRead, 10, 10)}
	errs := make(chan []error, 1)
	go func() { errs <- e.applyAll(context.Background(), posts) }()
	e.waitQueued(20) // nothing is applied within the hour's wait
	if g := e.store.groups(); len(g) != 0 {
		t.Fatalf("groups %v applied before the stop", g)
	}
	e.stop()
	for i, err := range <-errs {
		if err != nil {
			t.Errorf("POST %d at the stop: %v", i, err)
		}
	}
	if n := e.count("read"); n != 20 {
		t.Errorf("%d messages read, want 20", n)
	}
	if err := e.a.Apply(context.Background(), statusesOf(whatsapp.StatusRead, 30, 1)); !errors.Is(err, statuses.ErrUnavailable) {
		t.Errorf("a POST after the stop: %v, want ErrUnavailable", err)
	}
}

// TestGivenUpPostLeavesTheQueue: a POST whose caller gives up before its
// group is sealed is not applied.
func TestGivenUpPostLeavesTheQueue(t *testing.T) {
	e := newEnv(t, 100, statuses.Options{MaxStatuses: 1000, Wait: time.Hour, Appliers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.a.Apply(ctx, statusesOf(whatsapp.StatusRead, 0, 10)); !errors.Is(err, statuses.ErrUnavailable) {
		t.Errorf("given up: %v, want ErrUnavailable", err)
	}
	if q := testutil.ToFloat64(e.a.Collectors()[3]); q != 0 {
		t.Errorf("%v statuses still queued, want 0", q)
	}
	e.stop()
	if g := e.store.groups(); len(g) != 0 {
		t.Errorf("groups %v, want none", g)
	}
}

// TestFullQueueRefusesAtOnce: past four full groups per applier waiting, a
// POST is refused at once.
func TestFullQueueRefusesAtOnce(t *testing.T) {
	e := newEnv(t, 100, statuses.Options{MaxStatuses: 10, Wait: time.Hour, Appliers: 1})
	ctx := context.Background()
	// The record's backlog table locked: the applier's first group (full,
	// so applied at once) waits for it, and the next four wait for the
	// applier.
	tx, err := e.store.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE provider_status_backlog`); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 5)
	go func() { errs <- e.a.Apply(ctx, statusesOf(whatsapp.StatusDelivered, 0, 10)) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.store.groups()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for i := 1; i < 5; i++ {
		go func() { errs <- e.a.Apply(ctx, statusesOf(whatsapp.StatusDelivered, i*10, 10)) }()
	}
	e.waitQueued(40)
	start := time.Now()
	if err := e.a.Apply(ctx, statusesOf(whatsapp.StatusDelivered, 50, 10)); !errors.Is(err, statuses.ErrUnavailable) {
		t.Errorf("past the queue's bound: %v, want ErrUnavailable", err)
	} else if time.Since(start) > time.Second {
		t.Errorf("refused after %s, want at once", time.Since(start))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Errorf("a POST within the bound: %v", err)
		}
	}
	if n := e.count("delivered"); n != 50 {
		t.Errorf("%d messages delivered, want 50", n)
	}
}
