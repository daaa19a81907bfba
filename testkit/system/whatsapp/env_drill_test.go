//go:build drill

package whatsapp

// What the four drills share: a drillenv environment (the built binaries,
// an embedded NATS, Redis under a prefix of their own, a fresh database,
// provider-sim) with provider-sim's rules set through its admin API, the
// real gateway receiving provider-sim's webhooks, and a company with a key
// for the public API, through which every drill sends and reads.

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/drillenv"
)

const (
	// rate is the throughput of every number (messages per second), at
	// Parley and at provider-sim alike.
	rate = 1000
	// simLatency is how long provider-sim takes over every send.
	simLatency = 20 * time.Millisecond
	// claimBatch is PARLEY_DISPATCH_CLAIM_BATCH (its default): the most
	// messages one claim takes.
	claimBatch = 500
)

// drill is one drill's environment: its company (drillenv.Sender: a
// number at rate, the template drill_update, a campaign and an automation)
// and its client of the gateway's API.
type drill struct {
	*drillenv.Env
	t   *testing.T
	s   drillenv.Sender
	api drillenv.API
}

// newDrill prepares a drill: provider-sim with its latency and the rules
// given (PATCH /_sim/rules), the company, and the gateway, which receives
// provider-sim's webhooks. The dispatchers are the drill's to start.
func newDrill(t *testing.T, slug string, rules map[string]any) *drill {
	t.Helper()
	e := drillenv.New(t, drillenv.Options{SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=" + simLatency.String()}})
	if rules != nil {
		e.Sim.Do(http.MethodPatch, "/_sim/rules", rules, nil)
	}
	d := &drill{Env: e, t: t, s: e.NewSender(slug, rate)}
	_, gateway := e.StartGatewayForSim()
	d.api = e.NewAPI(gateway, d.s.Company.ID)
	return d
}

// registerTemplate registers the company's template at provider-sim, as
// an APPROVED template every number may send (until one is registered, the
// simulator accepts any name and has nothing to pause), and returns its id
// there. Its webhooks name it by name and language, by which Parley finds
// its own.
func (d *drill) registerTemplate() string {
	d.t.Helper()
	var st whatsappsim.TemplateState
	d.Sim.Do(http.MethodPut, "/_sim/templates/"+d.s.Tpl.Name+"/"+d.s.Tpl.Language,
		map[string]any{"body_parameters": len(d.s.Tpl.BodyParameters)}, &st)
	return st.ID
}

// simTemplate calls a lifecycle endpoint of provider-sim's admin API on the
// template (pause, unpause) and returns the template as it answers; the
// change's webhook goes to the gateway.
func (d *drill) simTemplate(id, action string) whatsappsim.TemplateState {
	d.t.Helper()
	var st whatsappsim.TemplateState
	d.Sim.Do(http.MethodPost, "/_sim/templates/"+id+"/"+action, map[string]any{}, &st)
	return st
}

// templateStatus is the template's status as Parley has recorded it.
func (d *drill) templateStatus() string {
	d.t.Helper()
	var s string
	if err := d.Pool.QueryRow(d.Ctx, `SELECT status FROM templates WHERE id = $1`, d.s.Tpl.ID).Scan(&s); err != nil {
		d.t.Fatal(err)
	}
	return s
}

// waitTemplate waits until Parley has recorded the template's status and
// returns when it saw it.
func (d *drill) waitTemplate(status string, within time.Duration) time.Time {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := d.templateStatus()
		if got == status {
			return time.Now()
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("Parley's template is %s %s after the change at provider-sim, want %s", got, within, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// batches reads each batch's status through the API (GET
// /api/batches/{id}).
func (d *drill) batches(ids []string) []record.Batch {
	d.t.Helper()
	out := make([]record.Batch, len(ids))
	for i, id := range ids {
		d.api.Do(http.MethodGet, "/api/batches/"+id, nil, &out[i])
	}
	return out
}

// counts adds up the batches' messages by state, and their held messages
// by reason, as the API gives them.
func counts(bs []record.Batch) (states map[record.State]int, held map[record.HoldReason]int) {
	states, held = map[record.State]int{}, map[record.HoldReason]int{}
	for _, b := range bs {
		for s, n := range b.Counts {
			states[s] += n
		}
		for _, h := range b.Held {
			held[h.Reason] += h.Messages
		}
	}
	return states, held
}

// messages lists the batches' messages in a state through the API (GET
// /api/batches/{id}/messages, pages of 1,000).
func (d *drill) messages(ids []string, state record.State) []record.Message {
	d.t.Helper()
	var out []record.Message
	for _, id := range ids {
		q := url.Values{"state": {string(state)}, "limit": {"1000"}}
		for {
			var page record.Page
			d.api.Do(http.MethodGet, "/api/batches/"+id+"/messages?"+q.Encode(), nil, &page)
			out = append(out, page.Messages...)
			if page.NextCursor == nil {
				break
			}
			q.Set("cursor", *page.NextCursor)
		}
	}
	return out
}

// inFlightBound is the most sends a template's refusal may meet when the
// provider starts refusing it: the sends that had passed Parley's template
// check (one read before each claim is sent) and were not yet answered,
// with those checked before Parley heard of it (the webhook, or the first
// refusal's answer). Each dispatcher's lane worker for the account has at
// most two claims past the check at a time: the claim going out, whose
// permits the throughput limiter grants at the account's rate, a claim's
// size at most at once (ratelimit.ThroughputBurst), and the next, checked
// once the last of them was granted; besides those, the provider holds
// what it was sent during its latency. A claim is a tenth of the account's
// throughput, at most PARLEY_DISPATCH_CLAIM_BATCH (engine.step). One
// dispatcher at 1,000/s against 20 ms: 2 × 100 + 20 = 220. Parley holding
// the template within a claim's time of the first refusal is what keeps the
// refusals under it.
func inFlightBound(dispatchers, perSecond int, latency time.Duration) (bound int, why string) {
	claim := min(max(perSecond/10, 1), claimBatch)
	wire := int(float64(perSecond) * latency.Seconds())
	bound = dispatchers * (2*claim + wire)
	return bound, fmt.Sprintf("%d dispatcher(s) × (2 claims of %d + %d/s × %s at provider-sim)", dispatchers, claim, perSecond, latency)
}

// since is t as an offset from start, for a log line.
func since(start, t time.Time) string { return fmt.Sprintf("+%.2fs", t.Sub(start).Seconds()) }
