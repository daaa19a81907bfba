//go:build drill || bench

package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/drilltally"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/serviceproc"
	"github.com/parleyhq/parley/testkit/storetest"
)

const drillToken = "drill-access-token-0123456789"

// drillEnv is what a drill or the bench runs the binaries against.
type drillEnv struct {
	t      testing.TB
	ctx    context.Context
	dbURL  string
	pool   *pgxpool.Pool
	cat    *catalog.Store
	nats   *bustest.Server
	busCfg bus.Config
	nc     *nats.Conn
	js     jetstream.JetStream
	redis  ratelimit.RedisConfig
	sim    simClient
	simP   *serviceproc.Process
	phones int64
	// accepted is every phone of every batch the stream took (publish
	// acked): what the drills count at the provider.
	accepted []string
}

type drillOptions struct {
	// pgURL is a private cluster's database to use instead of a fresh
	// database on the shared server.
	pgURL string
	// simEnv configures provider-sim (latency, ...).
	simEnv []string
	// busCfg is a NATS of the drill's own (the cluster drill's nodes) to
	// use instead of an embedded server.
	busCfg *bus.Config
}

func newDrillEnv(t testing.TB, o drillOptions) *drillEnv {
	t.Helper()
	e := &drillEnv{t: t, ctx: context.Background(), phones: 14150000000}
	if o.pgURL != "" {
		if _, err := store.Migrate(e.ctx, o.pgURL); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(e.ctx, o.pgURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e.dbURL, e.pool = o.pgURL, pool
	} else {
		e.dbURL, e.pool = storetest.NewDatabase(t)
	}
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	e.cat = catalog.NewStore(e.pool, box)

	if o.busCfg != nil {
		e.busCfg = *o.busCfg
	} else {
		e.nats = bustest.NewServer(t)
		e.busCfg = bustest.Config(e.nats.URL())
	}
	if e.nc, err = bus.Connect(e.busCfg, "drill"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.js, err = bus.JetStream(e.nc); err != nil {
		t.Fatal(err)
	}
	// A cluster just started answers once it has elected its meta leader.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := bus.EnsureStream(e.ctx, e.js, e.busCfg)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	e.redis = ratelimittest.Config(t)

	simAddr := freeAddr(t)
	env := append([]string{
		"PARLEY_PROVIDER_SIM_ADDR=" + simAddr, "PARLEY_LOG_LEVEL=warn",
		"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER=100000", "PARLEY_PROVIDER_SIM_MAX_RECIPIENTS=500000",
	}, o.simEnv...)
	e.sim = simClient{t: t, base: "http://" + simAddr}
	e.simP = startProc(t, "provider-sim", bins.providerSim, e.sim.base+"/_sim/stats", 20*time.Second, env...)
	return e
}

// sender is a company with an account the simulator serves, a template and
// a campaign on it.
type sender struct {
	company catalog.Company
	acct    catalog.MessagingAccount
	tpl     catalog.Template
	camp    catalog.Campaign
	auto    catalog.Automation
}

var pnidSeq = time.Now().UnixNano() % 1_000_000

func (e *drillEnv) newSender(slug string, perSecond int) sender {
	e.t.Helper()
	var s sender
	var err error
	if s.company, err = e.cat.CreateCompany(e.ctx, catalog.NewCompany{Slug: slug, Name: slug, SubscriptionActive: true, Provisioned: true}); err != nil {
		e.t.Fatal(err)
	}
	pnidSeq++
	pnid := fmt.Sprintf("77%09d", pnidSeq)
	if s.acct, err = e.cat.CreateMessagingAccount(e.ctx, catalog.NewMessagingAccount{CompanyID: s.company.ID, Name: "main",
		PhoneNumberID: pnid, AccessToken: drillToken, Connected: true, ThroughputPerSecond: perSecond}); err != nil {
		e.t.Fatal(err)
	}
	e.sim.do("PUT", "/_sim/accounts/"+pnid, map[string]any{"token": drillToken, "throughput_per_second": perSecond}, nil)
	if s.tpl, err = e.cat.CreateTemplate(e.ctx, catalog.NewTemplate{CompanyID: s.company.ID, Template: whatsapp.Template{
		Name: "drill_update", Language: "en_US", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}},
	}}); err != nil {
		e.t.Fatal(err)
	}
	if s.camp, err = e.cat.CreateCampaign(e.ctx, s.company.ID, "drill", s.tpl.ID, s.acct.ID); err != nil {
		e.t.Fatal(err)
	}
	if s.auto, err = e.cat.CreateAutomation(e.ctx, catalog.NewAutomation{CompanyID: s.company.ID, Name: "drill", Active: true,
		TemplateID: &s.tpl.ID, MessagingAccountID: &s.acct.ID}); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// dispatcherEnv is the environment of a dispatcher binary on this env.
func (e *drillEnv) dispatcherEnv(addrVar, addr string, extra ...string) []string {
	return append([]string{
		addrVar + "=" + addr,
		"PARLEY_POSTGRES_URL=" + e.dbURL, "PARLEY_POSTGRES_MAX_CONNS=20",
		"PARLEY_NATS_URL=" + e.busCfg.URL, "PARLEY_NATS_STREAM=" + e.busCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + e.busCfg.Prefix,
		"PARLEY_NATS_STREAM_REPLICAS=" + strconv.Itoa(e.busCfg.StreamReplicas),
		"PARLEY_REDIS_ADDR=" + e.redis.Addr, "PARLEY_REDIS_KEY_PREFIX=" + e.redis.KeyPrefix,
		"PARLEY_WHATSAPP_BASE_URL=" + e.sim.base, "PARLEY_WHATSAPP_TIMEOUT=2s",
		"PARLEY_LOG_LEVEL=info", "PARLEY_LOG_FORMAT=console",
	}, extra...)
}

// startCampaign runs the campaign dispatcher binary and waits until it is ready.
func (e *drillEnv) startCampaign(extra ...string) (*serviceproc.Process, string) {
	e.t.Helper()
	return e.startDispatcher("campaign-dispatcher", bins.campaign, "PARLEY_CAMPAIGN_DISPATCHER_ADDR", extra...)
}

// startDispatcher runs a dispatcher binary, listening where its addrVar
// says, and waits until it is ready; it returns the process and its address.
func (e *drillEnv) startDispatcher(name, bin, addrVar string, extra ...string) (*serviceproc.Process, string) {
	e.t.Helper()
	addr := freeAddr(e.t)
	p := startProc(e.t, name, bin, "http://"+addr+"/readyz", 30*time.Second, e.dispatcherEnv(addrVar, addr, extra...)...)
	return p, addr
}

// nextPhones returns n numbers no earlier call returned.
func (e *drillEnv) nextPhones(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "+" + strconv.FormatInt(e.phones, 10)
		e.phones++
	}
	return out
}

// publishCampaign publishes a campaign batch as the gateway does and
// returns when the stream has it (the 202 point).
func (e *drillEnv) publishCampaign(s sender, phones []string) (batchID string, ackedAt time.Time) {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	b := &sendsv1.CampaignBatch{BatchId: id, CompanyId: s.company.ID, CampaignId: s.camp.ID, Phones: phones,
		AcceptedAt: timestamppb.Now(), Source: "api:campaigns/send"}
	e.publish(e.busCfg.CampaignSubject(s.company.ID), id, b)
	e.accepted = append(e.accepted, phones...)
	return id, time.Now()
}

func (e *drillEnv) publish(subject, id string, m proto.Message) {
	e.t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	// Retried like the gateway's caller would: the msg id makes it harmless.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		_, err := e.js.Publish(ctx, subject, data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("publish %s: %v", subject, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// simStats is the part of provider-sim's /_sim/stats the drills read.
type simStats struct {
	Requests            int64            `json:"requests"`
	Accepted            int64            `json:"accepted"`
	Errors              map[string]int64 `json:"errors"`
	Recipients          int              `json:"recipients"`
	DuplicateRecipients int64            `json:"duplicate_recipients"`
	MaxPerRecipient     int64            `json:"max_per_recipient"`
	UntrackedSends      int64            `json:"untracked_sends"`
}

func (e *drillEnv) simStats() simStats {
	var s simStats
	e.sim.do("GET", "/_sim/stats", nil, &s)
	return s
}

// waitReceived waits until the provider accepted at least n sends.
func (e *drillEnv) waitReceived(n int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for e.simStats().Accepted < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("provider received %d of %d within %s", e.simStats().Accepted, n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *drillEnv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// take counts the accepted contacts at provider-sim, per recipient, and in
// the messages table (testkit/drilltally).
func (e *drillEnv) take() drilltally.Tally {
	e.t.Helper()
	tl, err := drilltally.Take(e.ctx, drilltally.Sim{URL: e.sim.base}, e.pool, e.accepted)
	if err != nil {
		e.t.Fatal(err)
	}
	return tl
}

// settle waits until every accepted contact reached the provider and no
// message is open, or the time is up, and returns the tally either way.
func (e *drillEnv) settle(within time.Duration) drilltally.Tally {
	e.t.Helper()
	tl, err := drilltally.Settle(e.ctx, drilltally.Sim{URL: e.sim.base}, e.pool, e.accepted, within)
	if err != nil {
		e.t.Fatal(err)
	}
	return tl
}
