//go:build bench

package main

// The naive dispatcher of make bench-delivery's floor: the least
// any campaign dispatcher must do per message, run as a process of its own
// (this test binary re-executed with PARLEY_BENCH_NAIVE_DISPATCHER set) so
// that its CPU is measured apart. A JetStream pull consumer on the stream's
// campaign subjects; for every batch, one provider call per contact and one
// batched insert (COPY) of the outcomes into naive_outcomes, with a row in
// naive_batches in the same transaction (what the bench polls), then the
// ack.
// No claims, no rules, no messages rows, no catalog reads: the account,
// token and template come from its environment.

import (
	"context"
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
	naiveEnv      = "PARLEY_BENCH_NAIVE_DISPATCHER"
	naiveConsumer = "naive-dispatcher"
	// naiveTable is where the naive dispatcher records its outcomes.
	naiveTable = `CREATE TABLE naive_outcomes (
	batch_id text NOT NULL, phone text NOT NULL, wamid text, error text, sent_at timestamptz NOT NULL);
CREATE TABLE naive_batches (batch_id text NOT NULL)`
)

// init runs the naive dispatcher instead of the tests when this binary was
// started as one (by benchFloor).
func init() {
	if os.Getenv(naiveEnv) == "" {
		return
	}
	if err := runNaive(); err != nil {
		fmt.Fprintln(os.Stderr, "naive dispatcher:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runNaive() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
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
			naiveBatch(ctx, m, client, acct, tpl, pool, sem)
		}()
	}
	wg.Wait()
	return nil
}

// naiveBatch sends every contact of one batch, records the outcomes with
// one COPY and acks the batch (a failed insert naks it).
func naiveBatch(ctx context.Context, m jetstream.Msg, client *whatsapp.Client, acct whatsapp.Account, tpl whatsapp.Template,
	pool *pgxpool.Pool, sem chan struct{}) {
	var b sendsv1.CampaignBatch
	if err := proto.Unmarshal(m.Data(), &b); err != nil {
		_ = m.Term()
		return
	}
	rows := make([][]any, len(b.Phones))
	var wg sync.WaitGroup
	for i, phone := range b.Phones {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			wamid, err := client.SendTemplate(context.WithoutCancel(ctx), acct, tpl, whatsapp.Recipient{Phone: phone}, whatsapp.Overrides{})
			var wamidV, errV any
			if err != nil {
				errV = err.Error()
			} else {
				wamidV = wamid
			}
			rows[i] = []any{b.BatchId, phone, wamidV, errV, time.Now()}
		}()
	}
	wg.Wait()
	err := pgx.BeginFunc(context.WithoutCancel(ctx), pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(context.WithoutCancel(ctx), pgx.Identifier{"naive_outcomes"},
			[]string{"batch_id", "phone", "wamid", "error", "sent_at"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		_, err := tx.Exec(context.WithoutCancel(ctx), `INSERT INTO naive_batches (batch_id) VALUES ($1)`, b.BatchId)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "naive dispatcher: insert:", err)
		_ = m.Nak()
		return
	}
	_ = m.Ack()
}
