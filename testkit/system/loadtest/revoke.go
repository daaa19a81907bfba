package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// RevokeOptions are the knobs of make bench-revoke.
type RevokeOptions struct {
	// Gateways is how many gateway processes serve (and are measured).
	Gateways int
	// Companies carry the background load (their keys are never revoked).
	Companies int
	// Rate is the background load per gateway, in requests per second,
	// from Conns connections each.
	Rate  float64
	Conns int
	// Rounds is how many keys are revoked with the broadcast working.
	Rounds int
	// FallbackRounds are revoked with the broadcast lost, where only
	// FallbackTTL (the gateways' PARLEY_GATEWAY_CACHE_TTL) ends the key.
	FallbackRounds int
	FallbackTTL    time.Duration
	// Target is what each revoke-to-401 must stay under with the broadcast.
	Target time.Duration
}

// pollTimeout bounds the wait for one gateway's first 401.
const pollTimeout = 10 * time.Second

// RevokeBench measures how long a revoked key keeps working: several gateway
// processes under load, an admin process whose JSON API revokes one
// company's key, and, for each gateway, the time from the revoke call
// returning to that gateway's first 401 for the key (each gateway polled in a
// tight loop on a connection of its own). Then the same with the broadcast
// lost: gateways that listen on other subjects than the admin broadcasts on,
// where the cache TTL alone must end the key. Everything it creates is
// removed after. It returns an error when the target is missed, when the
// background load got any answer but 202, or when a gateway's rate limiter
// fell back (parley_ratelimit_fallback_total moved).
func RevokeBench(ctx context.Context, o RevokeOptions, w io.Writer) error {
	victims := o.Rounds + o.FallbackRounds
	sc, err := newScratch(ctx, "revoke", o.Companies+victims, w)
	if err != nil {
		return err
	}
	defer sc.close()
	revoked, loaded := sc.tenants[:victims], CampaignRequests(sc.tenants[victims:], 10)
	// The admin broadcasts on busCfg. The fallback gateways publish and
	// listen on lostCfg, so that no broadcast reaches them.
	busCfg, lostCfg := sc.bus("revoke"), sc.bus("revokelost")

	dir, err := os.MkdirTemp("", "revoke-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	gatewayBin, adminBin := filepath.Join(dir, "gateway"), filepath.Join(dir, "admin")
	if err := serviceproc.BuildService(ctx, "gateway", gatewayBin, os.Stderr); err != nil {
		return err
	}
	if err := serviceproc.BuildService(ctx, "admin", adminBin, os.Stderr); err != nil {
		return err
	}

	token := sc.tag + strings.Repeat("x", 32) // a throwaway operator token
	adminAddr, err := serviceproc.FreeAddr()
	if err != nil {
		return err
	}
	admin, err := serviceproc.Start(ctx, serviceproc.Options{Name: "admin", Bin: adminBin,
		Env:   append(sc.env(busCfg), "PARLEY_ADMIN_ADDR="+adminAddr, "PARLEY_ADMIN_TOKEN="+token),
		Probe: "http://" + adminAddr + "/readyz", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = admin.Stop() }()
	revoke := func(t Tenant) (time.Time, error) { return revokeKey(ctx, "http://"+adminAddr, token, t) }

	fmt.Fprintf(w, "background load: %d companies' keys, %.0f req/s per gateway from %d connections, 10 contacts per send\n",
		o.Companies, o.Rate, o.Conns)

	s := scenario{name: "broadcast", gateways: o.Gateways, ttl: time.Hour, env: sc.env(busCfg),
		bin: gatewayBin, load: loaded, o: o, victims: revoked[:o.Rounds], revoke: revoke}
	fmt.Fprintf(w, "\n%d gateways (PARLEY_GATEWAY_CACHE_TTL=%s: only the broadcast can end a key in time), %d revocations through the admin API\n",
		s.gateways, s.ttl, len(s.victims))
	got, err := s.run(ctx, w)
	if err != nil {
		return err
	}
	missed := got.report(w, o.Target)

	s = scenario{name: "broadcast lost", gateways: o.Gateways, ttl: o.FallbackTTL, env: sc.env(lostCfg),
		bin: gatewayBin, load: loaded, o: o, victims: revoked[o.Rounds:], revoke: revoke}
	fmt.Fprintf(w, "\n%d gateways that never hear the admin's broadcast (other subjects), PARLEY_GATEWAY_CACHE_TTL=%s, %d revocations\n",
		s.gateways, s.ttl, len(s.victims))
	lost, err := s.run(ctx, w)
	if err != nil {
		return err
	}
	// An entry is loaded before the revoke and lives for the TTL, so the
	// TTL bounds the time to 401 (plus one request's latency).
	lost.report(w, o.FallbackTTL+50*time.Millisecond)
	fmt.Fprintf(w, "  bound: an entry loaded before the revoke expires within PARLEY_GATEWAY_CACHE_TTL (%s); the next request reloads it and gets 401\n", o.FallbackTTL)
	if missed {
		return fmt.Errorf("revoke-to-401 with the broadcast missed the %s target", o.Target)
	}
	return nil
}

// revokeKey revokes the tenant's key through the admin JSON API and returns
// when the call returned.
func revokeKey(ctx context.Context, adminURL, token string, t Tenant) (time.Time, error) {
	p, err := apikey.Parse(t.Key)
	if err != nil {
		return time.Time{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		fmt.Sprintf("%s/admin/api/companies/%d/keys/%s/revoke", adminURL, t.CompanyID, p.KeyID), nil)
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("revoke: %w", err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	returned := time.Now()
	if res.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("revoke: status %d: %s", res.StatusCode, body)
	}
	return returned, nil
}

// scenario is one set of gateways under load and the keys revoked on them.
type scenario struct {
	name     string
	gateways int
	ttl      time.Duration
	env      []string
	bin      string
	load     []Request
	victims  []Tenant
	revoke   func(Tenant) (time.Time, error)
	o        RevokeOptions
}

// timings are the revoke-to-401 times, per gateway.
type timings [][]time.Duration

func (s scenario) run(ctx context.Context, w io.Writer) (timings, error) {
	addrs := make([]string, s.gateways)
	for i := range addrs {
		addr, err := serviceproc.FreeAddr()
		if err != nil {
			return nil, err
		}
		p, err := serviceproc.Start(ctx, serviceproc.Options{Name: fmt.Sprintf("gateway %d", i+1), Bin: s.bin,
			Env: append(slices.Clone(s.env), "PARLEY_GATEWAY_ADDR="+addr, "PARLEY_GATEWAY_ACCESS_LOG=false",
				"PARLEY_GATEWAY_CACHE_TTL="+s.ttl.String()),
			Probe: "http://" + addr + "/readyz", Output: os.Stderr})
		if err != nil {
			return nil, err
		}
		defer func() { _ = p.Stop() }()
		addrs[i] = addr
	}
	guards := make([]fallbackGuard, len(addrs))
	for i, addr := range addrs {
		g, err := guardFallbacks(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("%s: gateway %d: %w", s.name, i+1, err)
		}
		guards[i] = g
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	loads := make([]Load, len(addrs))
	loadErrs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loads[i], loadErrs[i] = Pace(loadCtx, addr, "/api/campaigns/send", s.load, s.o.Conns, s.o.Rate)
		}()
	}
	stopAndReport := func() {
		stopLoad()
		wg.Wait()
		for i, l := range loads {
			fmt.Fprintf(w, "  load on gateway %d: %s\n", i+1, l)
		}
	}
	time.Sleep(time.Second) // let the load settle

	got := make(timings, len(addrs))
	for _, v := range s.victims {
		d, err := s.round(ctx, addrs, v)
		if err != nil {
			stopAndReport()
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		for i := range d {
			got[i] = append(got[i], d[i])
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopAndReport()
	// The background load's keys are never revoked: every answer must be a
	// 202, and no gateway's limiter may have fallen back.
	errs := loadErrs
	for i, l := range loads {
		if err := l.Wrong(); err != nil {
			errs = append(errs, fmt.Errorf("%s: load on gateway %d: %w", s.name, i+1, err))
		}
		if err := guards[i].check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: gateway %d: %w", s.name, i+1, err))
		}
	}
	return got, errors.Join(errs...)
}

// round revokes one key: every gateway has it cached as valid first; then
// one poller per gateway, on a connection dialled beforehand, sends with the
// key from the moment the revoke call returns until its first 401.
func (s scenario) round(ctx context.Context, addrs []string, v Tenant) ([]time.Duration, error) {
	req := CampaignRequests([]Tenant{v}, 1)[0]
	conns := make([]*conn, len(addrs))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	for i, addr := range addrs {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		conns[i] = c
		if status, err := c.do(appendRequest(nil, addr, "/api/campaigns/send", req)); err != nil || status != http.StatusAccepted {
			return nil, fmt.Errorf("gateway %d: the key before its revocation: status %d, %v; want 202", i+1, status, err)
		}
	}

	start := make(chan time.Time)
	out := make([]time.Duration, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := appendRequest(nil, addr, "/api/campaigns/send", req)
			t0, ok := <-start
			if !ok {
				return
			}
			for ctx.Err() == nil {
				status, err := conns[i].do(buf)
				if err != nil {
					errs[i] = fmt.Errorf("gateway %d: %w", i+1, err)
					return
				}
				if status == http.StatusUnauthorized {
					out[i] = time.Since(t0)
					return
				}
				// 202, or 429 once the company's limit is spent: still let in.
				if time.Since(t0) > pollTimeout {
					errs[i] = fmt.Errorf("gateway %d still lets the revoked key in %s after the revoke", i+1, pollTimeout)
					return
				}
			}
		}()
	}
	returned, err := s.revoke(v)
	if err != nil {
		close(start)
		wg.Wait()
		return nil, err
	}
	for range addrs {
		start <- returned
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// report prints p50, p99 and max per gateway and overall, and reports
// whether any time reached limit.
func (t timings) report(w io.Writer, limit time.Duration) (missed bool) {
	var all []time.Duration
	for i, ds := range t {
		fmt.Fprintf(w, "  gateway %d: %s\n", i+1, summary(ds))
		all = append(all, ds...)
	}
	fmt.Fprintf(w, "  overall:   %s\n", summary(all))
	worst := slices.Max(all)
	verdict := "met"
	if worst >= limit {
		verdict, missed = "MISSED", true
	}
	fmt.Fprintf(w, "  under %s: %s (max %s)\n", limit, verdict, fmtMS(worst))
	return missed
}

func summary(ds []time.Duration) string {
	s := slices.Sorted(slices.Values(ds))
	// p99 of n samples is the ceil(0.99 n)-th smallest: with 20, the max.
	p99 := s[(len(s)*99+99)/100-1]
	return fmt.Sprintf("n=%-3d p50 %s  p99 %s  max %s", len(s), fmtMS(s[len(s)/2]), fmtMS(p99), fmtMS(s[len(s)-1]))
}

func fmtMS(d time.Duration) string { return fmt.Sprintf("%8.2f ms", ms(d)) }
