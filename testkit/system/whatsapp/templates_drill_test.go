//go:build drill

package whatsapp

// A template's lifecycle during a campaign (issue 23, "Held, never burnt"):
// paused and approved again, its messages wait and then go; disabled, the
// rest fail with 132016 naming it, and nothing more is sent.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/drilltally"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestDrillTemplatePause: a 20,000-contact campaign; after 5,000 sends the
// template is paused through provider-sim's admin API (its first pause: 3
// hours, scaled to 8 s), whose webhook reaches the gateway; provider-sim
// approves it again at the pause's end. Every message waits and then goes:
// 0 failed, 0 lost, 0 duplicated per recipient at provider-sim; the sends
// refused with 132015 are no more than the sends in flight at the pause
// (inFlightBound).
func TestDrillTemplatePause(t *testing.T) {
	const contacts, pauseAfter = 20_000, 5_000
	pause := 8 * time.Second
	d := newDrill(t, "pause", map[string]any{"time_scale": pause.Seconds() / (3 * time.Hour).Seconds()})
	tplID := d.registerTemplate()
	d.StartCampaign()

	start := time.Now()
	ids := d.SendCampaign(d.api, d.s.Camp.ID, d.NextPhones(contacts))
	d.WaitReceived(pauseAfter, time.Minute)
	paused := d.simTemplate(tplID, "pause")
	pausedAt := time.Now()
	sentAtPause := d.SimStats().Accepted
	if paused.Status != "PAUSED" || paused.PausedUntil == nil {
		t.Fatalf("provider-sim's answer to the pause: %+v", paused)
	}
	recorded := d.waitTemplate("PAUSED", 10*time.Second)
	t.Logf("template paused at provider-sim %s, after %d of %d sends (want at least %d), for %s; Parley recorded PAUSED %s later",
		since(start, pausedAt), sentAtPause, contacts, pauseAfter, paused.PausedUntil.Sub(pausedAt).Round(10*time.Millisecond),
		recorded.Sub(pausedAt).Round(time.Millisecond))
	if sentAtPause < pauseAfter || sentAtPause >= contacts {
		t.Errorf("paused after %d sends: the drill wants it after %d and before the last", sentAtPause, pauseAfter)
	}

	// While it is paused: every message not sent waits, held with its
	// reason, none failed, as the API shows (those a dispatcher had
	// already taken to send are held at its next check of them).
	var states map[record.State]int
	var held map[record.HoldReason]int
	var unsent int
	allHeld := time.Time{}
	for d.templateStatus() == "PAUSED" {
		states, held = counts(d.batches(ids))
		unsent = contacts - int(d.SimStats().Accepted)
		if states[record.StateHeld] == unsent && held[record.HoldTemplatePaused] == unsent {
			allHeld = time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("while paused: the API counts %d held (%v) of the %d not sent, %d failed, at %s (%s after the pause); states %v",
		states[record.StateHeld], held, unsent, states[record.StateFailed], since(start, time.Now()), time.Since(pausedAt).Round(10*time.Millisecond), states)
	if allHeld.IsZero() || states[record.StateFailed] != 0 {
		t.Errorf("while paused: %d held (%v) of %d not sent and %d failed; want every one held for template_paused before the pause ends, none failed",
			states[record.StateHeld], held, unsent, states[record.StateFailed])
	}

	resumed := d.waitTemplate("APPROVED", pause+30*time.Second)
	t.Logf("APPROVED again at provider-sim's pause end: Parley recorded it %s after the pause", resumed.Sub(pausedAt).Round(time.Millisecond))
	if resumed.Sub(pausedAt) < pause-time.Second {
		t.Errorf("approved %s after a pause of %s", resumed.Sub(pausedAt), pause)
	}
	tl := d.Settle(2 * time.Minute)
	done := time.Now()
	refused := d.SimStats().Errors["132015"]
	bound, why := inFlightBound(1, rate, simLatency)
	t.Logf("sends refused with 132015: %d; bound (in flight at the pause) %d = %s", refused, bound, why)
	if refused > int64(bound) {
		t.Errorf("%d sends refused with 132015, more than the %d that can be in flight at the pause", refused, bound)
	}
	t.Logf("at provider-sim, per recipient: %s", tl)
	for _, p := range tl.Problems(drilltally.Expect{}) {
		t.Errorf("template pause: %s", p)
	}
	t.Logf("all %d sent %s after the resume (%s from the first 202)", tl.Received, done.Sub(resumed).Round(time.Millisecond),
		done.Sub(start).Round(time.Millisecond))
	if tl.Received != contacts {
		t.Errorf("%d of %d contacts reached provider-sim", tl.Received, contacts)
	}
}

// TestDrillTemplateDisabled: the template has been paused twice (and
// unpaused) through provider-sim's admin API; a 10,000-contact campaign
// starts, and after 3,000 sends its third pause DISABLES it. The messages
// not sent fail with 132016 and a title naming the template (through the
// API), each with its message.failed event and each batch with its
// batch.completed (the events table); the sends refused with 132016 are no
// more than those in flight (inFlightBound), and so are the sends
// provider-sim got after Parley had recorded DISABLED; after that nothing
// more reaches provider-sim.
func TestDrillTemplateDisabled(t *testing.T) {
	const contacts, disableAfter = 10_000, 3_000
	d := newDrill(t, "disabled", nil)
	storetest.Subscribe(t, d.Pool, d.s.Company.ID, "message.failed", "batch.completed", "batch.failed")
	tplID := d.registerTemplate()
	for range 2 {
		d.simTemplate(tplID, "pause")
		d.waitTemplate("PAUSED", 10*time.Second)
		d.simTemplate(tplID, "unpause")
		d.waitTemplate("APPROVED", 10*time.Second)
	}
	d.StartCampaign()

	start := time.Now()
	ids := d.SendCampaign(d.api, d.s.Camp.ID, d.NextPhones(contacts))
	d.WaitReceived(disableAfter, time.Minute)
	// From the third pause, watch for Parley's record of DISABLED and take
	// provider-sim's count of send requests as soon as it is there.
	type seen struct {
		at       time.Time
		requests int64
	}
	watch := make(chan seen, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var s string
			if err := d.Pool.QueryRow(d.Ctx, `SELECT status FROM templates WHERE id = $1`, d.s.Tpl.ID).Scan(&s); err == nil && s == "DISABLED" {
				if st, err := (drilltally.Sim{URL: d.Sim.Base}).Stats(d.Ctx); err == nil {
					watch <- seen{time.Now(), st.Requests}
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	disabled := d.simTemplate(tplID, "pause")
	disabledAt := time.Now()
	sentAtDisable := d.SimStats().Accepted
	if disabled.Status != "DISABLED" || disabled.PauseCount != 3 {
		t.Fatalf("provider-sim's answer to the third pause: %+v", disabled)
	}
	var rec seen
	select {
	case rec = <-watch:
	case <-time.After(10 * time.Second):
		t.Fatalf("Parley never recorded the template DISABLED")
	}
	t.Logf("template DISABLED at provider-sim (third pause) %s, after %d of %d sends (want at least %d); Parley recorded it %s later",
		since(start, disabledAt), sentAtDisable, contacts, disableAfter, rec.at.Sub(disabledAt).Round(time.Millisecond))
	if sentAtDisable < disableAfter || sentAtDisable >= contacts {
		t.Errorf("disabled after %d sends: the drill wants it after %d and before the last", sentAtDisable, disableAfter)
	}

	tl := d.Settle(time.Minute)
	// Nothing is sent any more: a second of quiet (four polls of the
	// dispatcher) changes nothing at provider-sim.
	quiet := d.SimStats().Requests
	time.Sleep(time.Second)
	st := d.SimStats()
	after := st.Requests - rec.requests
	refused := st.Errors["132016"]
	bound, why := inFlightBound(1, rate, simLatency)
	t.Logf("sends refused with 132016: %d; send requests at provider-sim after Parley recorded DISABLED: %d; bound (in flight) %d = %s",
		refused, after, bound, why)
	if refused > int64(bound) || after > int64(bound) {
		t.Errorf("%d refused with 132016 and %d sends after DISABLED was recorded, bound %d", refused, after, bound)
	}
	t.Logf("send requests at provider-sim in the second after the campaign settled: %d", st.Requests-quiet)
	if st.Requests != quiet {
		t.Errorf("%d send requests reached provider-sim after every message was final", st.Requests-quiet)
	}

	// The rest failed, each saying why, with its events.
	t.Logf("at provider-sim, per recipient: %s", tl)
	for _, p := range tl.Problems(drilltally.Expect{Failed: tl.Failed, NotSent: tl.Failed}) {
		t.Errorf("template disabled: %s", p)
	}
	failed := d.messages(ids, record.StateFailed)
	named := fmt.Sprintf("%s (%s)", d.s.Tpl.Name, d.s.Tpl.Language)
	wrong := 0
	for _, m := range failed {
		if m.ErrorCode == nil || *m.ErrorCode != record.CodeTemplateDisabled || m.ErrorTitle == nil || !strings.Contains(*m.ErrorTitle, named) {
			if wrong < 3 {
				t.Errorf("message %d (%s): code %s, title %s; want %d naming %s", m.ID, m.Phone, show(m.ErrorCode), show(m.ErrorTitle),
					record.CodeTemplateDisabled, named)
			}
			wrong++
		}
	}
	t.Logf("the API lists %d failed messages of the %d never sent: %d with 132016 naming %s, %d otherwise",
		len(failed), tl.Lost, len(failed)-wrong, named, wrong)
	if len(failed) != tl.Lost || wrong != 0 {
		t.Errorf("%d failed through the API, %d never sent, %d not 132016 naming the template", len(failed), tl.Lost, wrong)
	}
	var failedEvents, batchEvents int
	if err := d.Pool.QueryRow(d.Ctx, `SELECT count(*) FILTER (WHERE type = 'message.failed' AND (data->'error'->>'code')::int = $2),
			count(*) FILTER (WHERE type IN ('batch.completed', 'batch.failed'))
		FROM event_outbox WHERE company_id = $1 AND data->>'batch_id' = ANY($3::text[])`,
		d.s.Company.ID, record.CodeTemplateDisabled, ids).Scan(&failedEvents, &batchEvents); err != nil {
		t.Fatal(err)
	}
	t.Logf("events: %d message.failed with 132016, %d batch.completed or batch.failed for %d batches", failedEvents, batchEvents, len(ids))
	if failedEvents != len(failed) || batchEvents != len(ids) {
		t.Errorf("events: %d message.failed for %d failed messages, %d batch events for %d batches", failedEvents, len(failed), batchEvents, len(ids))
	}
}

// show is a nullable field for a log line.
func show[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%#v", *p)
}
