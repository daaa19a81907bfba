package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/store"
)

// scratch is what a load test makes on the local servers, all named with
// one random tag and all removed by close: a migrated database provisioned
// with companies, a Redis key prefix, and JetStream streams.
type scratch struct {
	tag         string
	dbURL       string
	redisAddr   string
	redisPrefix string
	natsURL     string
	tenants     []Tenant
	pool        *pgxpool.Pool
	js          jetstream.JetStream
	closers     []func()
}

// newScratch creates the database (named for name and the tag), provisions
// companies in it and connects to Redis and NATS. On error, what was made
// is already removed.
func newScratch(ctx context.Context, name string, companies int, w io.Writer) (*scratch, error) {
	pgAdmin, redisAddr, natsURL := serverURLs()
	return newScratchAt(ctx, name, companies, w, pgAdmin, redisAddr, natsURL)
}

// newScratchAt is newScratch on the given servers.
func newScratchAt(ctx context.Context, name string, companies int, w io.Writer, pgAdmin, redisAddr, natsURL string) (_ *scratch, err error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	s := &scratch{tag: hex.EncodeToString(b)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	s.redisAddr, s.natsURL, s.redisPrefix = redisAddr, natsURL, name+":"+s.tag+":"

	dbURL, dropDB, err := scratchDatabase(ctx, pgAdmin, "parley_"+name+"_"+s.tag)
	if err != nil {
		return nil, err
	}
	s.dbURL = dbURL
	s.closers = append(s.closers, dropDB)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, pool.Close)
	s.pool = pool
	fmt.Fprintf(w, "provisioning %d companies with keys and campaigns...\n", companies)
	if s.tenants, err = Provision(ctx, pool, companies, s.tag); err != nil {
		return nil, err
	}

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	s.closers = append(s.closers, func() {
		deleteKeys(context.Background(), rdb, s.redisPrefix)
		_ = rdb.Close()
	})
	nc, err := bus.Connect(bus.Config{URL: natsURL}, "parley-"+name)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, nc.Close)
	if s.js, err = jetstream.New(nc); err != nil {
		return nil, err
	}
	return s, nil
}

// bus returns a stream and subject prefix of the scratch's own, named for
// name; the stream is deleted by close.
func (s *scratch) bus(name string) bus.Config {
	c := bus.Config{URL: s.natsURL, Stream: strings.ToUpper(name) + "_" + s.tag, Prefix: strings.ToLower(name) + s.tag, StreamReplicas: 1}
	s.closers = append(s.closers, func() { _ = s.js.DeleteStream(context.Background(), c.Stream) })
	return c
}

// env is the configuration of a service on the scratch servers and stream c.
func (s *scratch) env(c bus.Config) []string {
	return []string{
		"PARLEY_POSTGRES_URL=" + s.dbURL,
		"PARLEY_REDIS_ADDR=" + s.redisAddr,
		"PARLEY_REDIS_KEY_PREFIX=" + s.redisPrefix,
		"PARLEY_NATS_URL=" + s.natsURL,
		"PARLEY_NATS_STREAM=" + c.Stream,
		"PARLEY_NATS_SUBJECT_PREFIX=" + c.Prefix,
		"PARLEY_LOG_LEVEL=warn",
	}
}

// close removes everything, newest first.
func (s *scratch) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

func scratchDatabase(ctx context.Context, adminURL, name string) (string, func(), error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect %s: %w", adminURL, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	if _, err := store.Migrate(ctx, u.String()); err != nil {
		drop()
		return "", nil, err
	}
	return u.String(), drop, nil
}

func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}
