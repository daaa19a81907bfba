//go:build bench

package campaign

// The naive dispatchers of make bench-delivery's floor: the least any
// campaign dispatcher must do per message, run as a process of its own
// (this test binary re-executed with PARLEY_BENCH_NAIVE_DISPATCHER set to
// the record it keeps) so that its CPU is measured apart. A JetStream pull
// consumer on the stream's campaign subjects; for every batch, one provider
// call per contact, then one transaction that records the batch's outcomes
// with one batched insert (COPY), then the ack. No claims, no rules, no
// catalog reads: the account, token and template come from its environment.
// Its record is one of two:
//   - messages: Parley's own, the batches row as the expansion records it
//     (already completed) and one messages row per contact written once,
//     after its send, with its final state: the same table, indexes and
//     constraints as the campaign dispatcher's. The bench polls the
//     batches rows.
//   - outcomes: a table of its own with no index or constraint
//     (naive_outcomes), with a row in naive_batches (what the bench polls).
// Its SQL is its own, as a floor's is: it does not use pkg/record.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

const (
	naiveEnv = "PARLEY_BENCH_NAIVE_DISPATCHER"
	// naiveEnv's values: the record the naive dispatcher keeps.
	naiveMessages = "messages"
	naiveOutcomes = "outcomes"

	naiveConsumer = "naive-dispatcher"
	// naiveTable is where the outcomes naive dispatcher records.
	naiveTable = `CREATE TABLE naive_outcomes (
	batch_id text NOT NULL, phone text NOT NULL, wamid text, error text, sent_at timestamptz NOT NULL);
CREATE TABLE naive_batches (batch_id text NOT NULL)`
)

// init runs the naive dispatcher instead of the tests when this binary was
// started as one (by benchFloor).
func init() {
	mode := os.Getenv(naiveEnv)
	if mode == "" {
		return
	}
	if err := runNaive(mode); err != nil {
		fmt.Fprintln(os.Stderr, "naive dispatcher:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// naiveOutcome is what the provider answered for one contact, and when.
type naiveOutcome struct {
	wamid string
	err   error
	at    time.Time
}

// naiveRecorder writes the outcomes of one batch, outs[i] for b.Phones[i],
// in tx.
type naiveRecorder func(ctx context.Context, tx pgx.Tx, b *sendsv1.CampaignBatch, outs []naiveOutcome) error

func runNaive(mode string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var rec naiveRecorder
	switch mode {
	case naiveOutcomes:
		rec = recordNaiveOutcomes
	case naiveMessages:
		acct, err1 := strconv.ParseInt(os.Getenv("PARLEY_NAIVE_ACCOUNT_ID"), 10, 64)
		tpl, err2 := strconv.ParseInt(os.Getenv("PARLEY_NAIVE_TEMPLATE_ID"), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("PARLEY_NAIVE_ACCOUNT_ID, PARLEY_NAIVE_TEMPLATE_ID: %w", err)
		}
		rec = messagesRecorder{account: acct, template: tpl}.record
	default:
		return fmt.Errorf("%s=%q: want %s or %s", naiveEnv, mode, naiveMessages, naiveOutcomes)
	}
	cfg := bus.Config{URL: os.Getenv("PARLEY_NATS_URL"), Stream: os.Getenv("PARLEY_NATS_STREAM"),
		Prefix: os.Getenv("PARLEY_NATS_SUBJECT_PREFIX"), StreamReplicas: 1}
	workers, err := strconv.Atoi(os.Getenv("PARLEY_DISPATCH_WORKERS"))
	if err != nil || workers < 1 {
		return fmt.Errorf("PARLEY_DISPATCH_WORKERS: %q", os.Getenv("PARLEY_DISPATCH_WORKERS"))
	}
	acct := whatsapp.Account{PhoneNumberID: os.Getenv("PARLEY_NAIVE_PHONE_NUMBER_ID"), AccessToken: os.Getenv("PARLEY_NAIVE_ACCESS_TOKEN")}
	tpl := whatsapp.Template{Name: "drill_update", Language: "en_US", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}}}

	pool, err := pgxpool.New(ctx, os.Getenv("PARLEY_POSTGRES_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := bus.Connect(cfg, "naive-dispatcher")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := bus.JetStream(nc)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{Durable: naiveConsumer,
		FilterSubject: cfg.Prefix + ".campaign.>", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 64})
	if err != nil {
		return err
	}
	client, err := whatsapp.NewClient(whatsapp.Config{BaseURL: os.Getenv("PARLEY_WHATSAPP_BASE_URL"), MaxConnsPerHost: workers})
	if err != nil {
		return err
	}
	defer client.Close()

	ln, err := net.Listen("tcp", os.Getenv("PARLEY_NAIVE_ADDR"))
	if err != nil {
		return err
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	}()
	defer ln.Close()

	it, err := cons.Messages(jetstream.PullMaxMessages(8))
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); it.Stop() }()
	sem := make(chan struct{}, workers) // provider calls in flight
	batches := make(chan struct{}, 4)   // batches in flight
	var wg sync.WaitGroup
	for {
		m, err := it.Next()
		if err != nil {
			break // stopped
		}
		batches <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-batches; wg.Done() }()
			naiveBatch(ctx, m, client, acct, tpl, pool, sem, rec)
		}()
	}
	wg.Wait()
	return nil
}

// naiveBatch sends every contact of one batch, records the outcomes in one
// transaction and acks the batch (a failed transaction naks it).
func naiveBatch(ctx context.Context, m jetstream.Msg, client *whatsapp.Client, acct whatsapp.Account, tpl whatsapp.Template,
	pool *pgxpool.Pool, sem chan struct{}, rec naiveRecorder) {
	var b sendsv1.CampaignBatch
	if err := proto.Unmarshal(m.Data(), &b); err != nil {
		_ = m.Term()
		return
	}
	outs := make([]naiveOutcome, len(b.Phones))
	var wg sync.WaitGroup
	for i, phone := range b.Phones {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			wamid, err := client.SendTemplate(context.WithoutCancel(ctx), acct, tpl, whatsapp.Recipient{Phone: phone}, whatsapp.Overrides{})
			outs[i] = naiveOutcome{wamid: wamid, err: err, at: time.Now()}
		}()
	}
	wg.Wait()
	err := pgx.BeginFunc(context.WithoutCancel(ctx), pool, func(tx pgx.Tx) error {
		return rec(context.WithoutCancel(ctx), tx, &b, outs)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "naive dispatcher: insert:", err)
		_ = m.Nak()
		return
	}
	_ = m.Ack()
}

// recordNaiveOutcomes appends the outcomes to naive_outcomes, and the batch
// to naive_batches.
func recordNaiveOutcomes(ctx context.Context, tx pgx.Tx, b *sendsv1.CampaignBatch, outs []naiveOutcome) error {
	rows := make([][]any, len(outs))
	for i, o := range outs {
		var wamid, errText any
		if o.err != nil {
			errText = o.err.Error()
		} else {
			wamid = o.wamid
		}
		rows[i] = []any{b.BatchId, b.Phones[i], wamid, errText, o.at}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"naive_outcomes"},
		[]string{"batch_id", "phone", "wamid", "error", "sent_at"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO naive_batches (batch_id) VALUES ($1)`, b.BatchId)
	return err
}

// messagesRecorder keeps Parley's record of a batch: its batches row, as
// the expansion records it but completed already, and one messages row per
// contact with its final state, written once.
type messagesRecorder struct{ account, template int64 }

func (r messagesRecorder) record(ctx context.Context, tx pgx.Tx, b *sendsv1.CampaignBatch, outs []naiveOutcome) error {
	kind, source, err := bus.DescribeBatch(b)
	if err != nil {
		return err
	}
	now := time.Now()
	accepted := now
	if b.AcceptedAt != nil {
		accepted = b.AcceptedAt.AsTime()
	}
	var campaign any
	if b.CampaignId != 0 {
		campaign = b.CampaignId
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, status, accepted_at, created_at, completed_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'completed', $7, $7, $8)
		ON CONFLICT (id) DO NOTHING`,
		b.BatchId, b.CompanyId, string(kind), string(source), campaign, len(b.Phones), accepted, now)
	if err != nil {
		return fmt.Errorf("record batch %s: %w", b.BatchId, err)
	}
	if tag.RowsAffected() == 0 {
		return nil // recorded by an earlier delivery: its sends were repeated
	}
	// The columns are named, the others take their defaults. created_at is
	// the batch's accepted_at, as Parley's expansion writes it.
	cols := []string{"batch_id", "seq", "company_id", "phone", "messaging_account_id", "template_id",
		"state", "lane", "provider_message_id", "error_code", "error_title", "attempts",
		"created_at", "updated_at", "sent_at", "failed_at"}
	rows := make([][]any, len(outs))
	for i, o := range outs {
		state, wamid, sentAt, failedAt := "sent", any(o.wamid), any(o.at), any(nil)
		var code, title any
		if o.err != nil {
			state, wamid, sentAt, failedAt, title = "failed", nil, nil, o.at, o.err.Error()
			var werr *whatsapp.Error
			if errors.As(o.err, &werr) && werr.Code != 0 {
				code, title = int32(werr.Code), werr.Title
			}
		}
		rows[i] = []any{b.BatchId, int32(i), b.CompanyId, b.Phones[i], r.account, r.template,
			state, "campaign", wamid, code, title, int32(1),
			accepted, o.at, sentAt, failedAt}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"messages"}, cols, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("record messages of batch %s: %w", b.BatchId, err)
	}
	return nil
}
