// Package drillenv is the environment of the drills and the delivery
// benchmarks that run the real binaries (go test -tags drill|bench): the
// binaries of the dispatcher's two commands and of provider-sim (built once
// by Main), an embedded NATS (or the drill's own), the local Redis under a
// key prefix of their own, a fresh database (or a private PostgreSQL
// cluster, StartPrivatePG) and a running provider-sim, with the helpers that
// publish as the gateway does and count at the provider.
package drillenv

import (
	"context"
	"fmt"
	"net/url"
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

// Token is the access token of every account a drill creates.
const Token = "drill-access-token-0123456789"

// Env is what a drill or a benchmark runs the binaries against.
type Env struct {
	T      testing.TB
	Ctx    context.Context
	DBURL  string
	Pool   *pgxpool.Pool
	Cat    *catalog.Store
	NATS   *bustest.Server // nil when Options.BusCfg was given
	BusCfg bus.Config
	NC     *nats.Conn
	JS     jetstream.JetStream
	Redis  ratelimit.RedisConfig
	Sim    SimClient
	SimP   *serviceproc.Process
	phones int64
	// Accepted is every phone of every batch the stream took (publish
	// acked): what the drills count at the provider.
	Accepted []string
}

// Options change what New prepares.
type Options struct {
	// PGURL is a private cluster's database to use instead of a fresh
	// database on the shared server.
	PGURL string
	// SimEnv configures provider-sim (latency, ...).
	SimEnv []string
	// BusCfg is a NATS of the drill's own (the cluster drill's nodes) to
	// use instead of an embedded server.
	BusCfg *bus.Config
}

// New starts provider-sim and prepares the database, NATS and Redis; every
// part is stopped or dropped when the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	if err := buildBins(); err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Ctx: context.Background(), phones: 14150000000}
	if o.PGURL != "" {
		if _, err := store.Migrate(e.Ctx, o.PGURL); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(e.Ctx, o.PGURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e.DBURL, e.Pool = o.PGURL, pool
	} else {
		e.DBURL, e.Pool = storetest.NewDatabase(t)
	}
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	e.Cat = catalog.NewStore(e.Pool, box)

	if o.BusCfg != nil {
		e.BusCfg = *o.BusCfg
	} else {
		e.NATS = bustest.NewServer(t)
		e.BusCfg = bustest.Config(e.NATS.URL())
	}
	if e.NC, err = bus.Connect(e.BusCfg, "drill"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.NC.Close)
	if e.JS, err = bus.JetStream(e.NC); err != nil {
		t.Fatal(err)
	}
	// A cluster just started answers once it has elected its meta leader.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := bus.EnsureStream(e.Ctx, e.JS, e.BusCfg)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	e.Redis = ratelimittest.Config(t)

	simAddr := FreeAddr(t)
	env := append([]string{
		"PARLEY_PROVIDER_SIM_ADDR=" + simAddr, "PARLEY_LOG_LEVEL=warn",
		"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER=100000", "PARLEY_PROVIDER_SIM_MAX_RECIPIENTS=500000",
	}, o.SimEnv...)
	e.Sim = SimClient{T: t, Base: "http://" + simAddr}
	e.SimP = StartProc(t, "provider-sim", Bins.ProviderSim, e.Sim.Base+"/_sim/stats", 20*time.Second, env...)
	return e
}

// Sender is a company with an account the simulator serves, a template and
// a campaign on it.
type Sender struct {
	Company catalog.Company
	Acct    catalog.MessagingAccount
	Tpl     catalog.Template
	Camp    catalog.Campaign
	Auto    catalog.Automation
}

var pnidSeq = time.Now().UnixNano() % 1_000_000

// NewSender creates a company with one number at perSecond (its own WABA
// and business portfolio), the template drill_update (en_US, one body
// parameter), and a campaign and an automation that send it on that number.
func (e *Env) NewSender(slug string, perSecond int) Sender {
	e.T.Helper()
	var s Sender
	var err error
	if s.Company, err = e.Cat.CreateCompany(e.Ctx, catalog.NewCompany{Slug: slug, Name: slug, SubscriptionActive: true, Provisioned: true}); err != nil {
		e.T.Fatal(err)
	}
	s.Acct = e.NewNumber(s.Company.ID, "main", perSecond, "", "")
	if s.Tpl, err = e.Cat.CreateTemplate(e.Ctx, catalog.NewTemplate{CompanyID: s.Company.ID, Template: whatsapp.Template{
		Name: "drill_update", Language: "en_US", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}},
	}}); err != nil {
		e.T.Fatal(err)
	}
	if s.Camp, err = e.Cat.CreateCampaign(e.Ctx, s.Company.ID, "drill", s.Tpl.ID, s.Acct.ID); err != nil {
		e.T.Fatal(err)
	}
	if s.Auto, err = e.Cat.CreateAutomation(e.Ctx, catalog.NewAutomation{CompanyID: s.Company.ID, Name: "drill", Active: true,
		TemplateID: &s.Tpl.ID, MessagingAccountID: &s.Acct.ID}); err != nil {
		e.T.Fatal(err)
	}
	return s
}

// NewNumber gives the company a number that provider-sim serves, at
// perSecond, in the WhatsApp Business Account waba and the business
// portfolio given, at Parley and at provider-sim alike; "" leaves either to
// its default (the number its own WABA, the WABA its own portfolio).
func (e *Env) NewNumber(companyID int64, name string, perSecond int, waba, portfolio string) catalog.MessagingAccount {
	e.T.Helper()
	pnidSeq++
	pnid := fmt.Sprintf("77%09d", pnidSeq)
	acct, err := e.Cat.CreateMessagingAccount(e.Ctx, catalog.NewMessagingAccount{CompanyID: companyID, Name: name,
		PhoneNumberID: pnid, AccessToken: Token, Connected: true, ThroughputPerSecond: perSecond, WABAID: waba, PortfolioID: portfolio})
	if err != nil {
		e.T.Fatal(err)
	}
	sim := map[string]any{"token": Token, "throughput_per_second": perSecond}
	if waba != "" {
		sim["waba_id"] = waba
	}
	if portfolio != "" {
		sim["portfolio_id"] = portfolio
	}
	e.Sim.Do("PUT", "/_sim/accounts/"+pnid, sim, nil)
	return acct
}

// DispatcherEnv is the environment of a dispatcher binary on this env.
func (e *Env) DispatcherEnv(addrVar, addr string, extra ...string) []string {
	return append([]string{
		addrVar + "=" + addr,
		"PARLEY_POSTGRES_URL=" + e.DBURL, "PARLEY_POSTGRES_MAX_CONNS=20",
		"PARLEY_NATS_URL=" + e.BusCfg.URL, "PARLEY_NATS_STREAM=" + e.BusCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + e.BusCfg.Prefix,
		"PARLEY_NATS_STREAM_REPLICAS=" + strconv.Itoa(e.BusCfg.StreamReplicas),
		"PARLEY_REDIS_ADDR=" + e.Redis.Addr, "PARLEY_REDIS_KEY_PREFIX=" + e.Redis.KeyPrefix,
		"PARLEY_WHATSAPP_BASE_URL=" + e.Sim.Base, "PARLEY_WHATSAPP_TIMEOUT=2s",
		"PARLEY_LOG_LEVEL=info", "PARLEY_LOG_FORMAT=console",
	}, extra...)
}

// StartCampaign runs the campaign dispatcher binary and waits until it is ready.
func (e *Env) StartCampaign(extra ...string) (*serviceproc.Process, string) {
	e.T.Helper()
	return e.StartDispatcher("campaign-dispatcher", Bins.Campaign, "PARLEY_CAMPAIGN_DISPATCHER_ADDR", extra...)
}

// StartDispatcher runs a dispatcher binary, listening where its addrVar
// says, and waits until it is ready; it returns the process and its address.
func (e *Env) StartDispatcher(name, bin, addrVar string, extra ...string) (*serviceproc.Process, string) {
	e.T.Helper()
	addr := FreeAddr(e.T)
	p := StartProc(e.T, name, bin, "http://"+addr+"/readyz", 30*time.Second, e.DispatcherEnv(addrVar, addr, extra...)...)
	return p, addr
}

// NextPhones returns n numbers no earlier call returned.
func (e *Env) NextPhones(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "+" + strconv.FormatInt(e.phones, 10)
		e.phones++
	}
	return out
}

// PublishCampaign publishes a campaign batch as the gateway does and
// returns when the stream has it (the 202 point).
func (e *Env) PublishCampaign(s Sender, phones []string) (batchID string, ackedAt time.Time) {
	e.T.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	b := &sendsv1.CampaignBatch{BatchId: id, CompanyId: s.Company.ID, CampaignId: s.Camp.ID, Phones: phones,
		AcceptedAt: timestamppb.Now(), Source: "api:campaigns/send"}
	e.Publish(e.BusCfg.CampaignSubject(s.Company.ID), id, b)
	e.Accepted = append(e.Accepted, phones...)
	return id, time.Now()
}

func (e *Env) Publish(subject, id string, m proto.Message) {
	e.T.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		e.T.Fatal(err)
	}
	// Retried like the gateway's caller would: the msg id makes it harmless.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(e.Ctx, 2*time.Second)
		_, err := e.JS.Publish(ctx, subject, data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("publish %s: %v", subject, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SimStats is the part of provider-sim's /_sim/stats the drills read.
type SimStats struct {
	Requests            int64            `json:"requests"`
	Accepted            int64            `json:"accepted"`
	Errors              map[string]int64 `json:"errors"`
	Recipients          int              `json:"recipients"`
	DuplicateRecipients int64            `json:"duplicate_recipients"`
	MaxPerRecipient     int64            `json:"max_per_recipient"`
	UntrackedSends      int64            `json:"untracked_sends"`
	// MessagingLimitRefused is the template sends refused past a business
	// portfolio's messaging limit.
	MessagingLimitRefused int64 `json:"messaging_limit_refused"`
}

func (e *Env) SimStats() SimStats {
	var s SimStats
	e.Sim.Do("GET", "/_sim/stats", nil, &s)
	return s
}

// WaitReceived waits until the provider accepted at least n sends.
func (e *Env) WaitReceived(n int64, within time.Duration) {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for e.SimStats().Accepted < n {
		if time.Now().After(deadline) {
			e.T.Fatalf("provider received %d of %d within %s", e.SimStats().Accepted, n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *Env) Count(sql string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.Pool.QueryRow(e.Ctx, sql, args...).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// Take counts the accepted contacts at provider-sim, per recipient, and in
// the messages table (testkit/drilltally).
func (e *Env) Take() drilltally.Tally {
	e.T.Helper()
	tl, err := drilltally.Take(e.Ctx, drilltally.Sim{URL: e.Sim.Base}, e.Pool, e.Accepted)
	if err != nil {
		e.T.Fatal(err)
	}
	return tl
}

// Settle waits until every accepted contact reached the provider and no
// message is open, or the time is up, and returns the tally either way.
func (e *Env) Settle(within time.Duration) drilltally.Tally {
	e.T.Helper()
	tl, err := drilltally.Settle(e.Ctx, drilltally.Sim{URL: e.Sim.Base}, e.Pool, e.Accepted, within)
	if err != nil {
		e.T.Fatal(err)
	}
	return tl
}

// StartAutomation runs the automation dispatcher binary.
func (e *Env) StartAutomation(extra ...string) (*serviceproc.Process, string) {
	e.T.Helper()
	return e.StartDispatcher("automation-dispatcher", Bins.Automation, "PARLEY_AUTOMATION_DISPATCHER_ADDR", extra...)
}

// PublishAutomation publishes a trigger for the given contacts.
func (e *Env) PublishAutomation(s Sender, phones []string) (batchID string, ackedAt time.Time) {
	e.T.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	b := &sendsv1.AutomationBatch{BatchId: id, CompanyId: s.Company.ID, AutomationId: s.Auto.ID, AcceptedAt: timestamppb.Now(),
		Source: "api:automations/send"}
	for _, p := range phones {
		b.Contacts = append(b.Contacts, &sendsv1.AutomationContact{Phone: p})
	}
	e.Publish(e.BusCfg.AutomationSubject(s.Company.ID), id, b)
	e.Accepted = append(e.Accepted, phones...)
	return id, time.Now()
}

// SimReceived is one message provider-sim accepted.
type SimReceived struct {
	ID            string    `json:"id"`
	PhoneNumberID string    `json:"phone_number_id"`
	To            string    `json:"to"`
	ReceivedAt    time.Time `json:"received_at"`
}

// SimMessages lists received messages, oldest first (the newest "limit").
func (e *Env) SimMessages(query url.Values) []SimReceived {
	var out struct {
		Messages []SimReceived `json:"messages"`
	}
	e.Sim.Do("GET", "/_sim/messages?"+query.Encode(), nil, &out)
	return out.Messages
}

// StartGateway runs the gateway binary on the environment (extra adds to or
// overrides its environment); it returns the process and its base URL.
func (e *Env) StartGateway(extra ...string) (*serviceproc.Process, string) {
	e.T.Helper()
	addr := FreeAddr(e.T)
	env := append([]string{"PARLEY_GATEWAY_ADDR=" + addr, "PARLEY_GATEWAY_ACCESS_LOG=false",
		"PARLEY_POSTGRES_URL=" + e.DBURL, "PARLEY_POSTGRES_MAX_CONNS=40",
		"PARLEY_NATS_URL=" + e.BusCfg.URL, "PARLEY_NATS_STREAM=" + e.BusCfg.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + e.BusCfg.Prefix,
		"PARLEY_REDIS_ADDR=" + e.Redis.Addr, "PARLEY_REDIS_KEY_PREFIX=" + e.Redis.KeyPrefix,
		"PARLEY_LOG_LEVEL=warn", "PARLEY_LOG_FORMAT=console"}, extra...)
	p := StartProc(e.T, "gateway", Bin(e.T, "gateway"), "http://"+addr+"/readyz", 30*time.Second, env...)
	return p, "http://" + addr
}
