package sends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/phone"
)

// BatchMessage is one validated message of a batch send. Its target is
// its campaign when ByCampaign, else its template and messaging account.
// An identifier 0 (what one beyond int64 decodes to) is no record.
type BatchMessage struct {
	Phone      string
	ByCampaign bool
	CampaignID int64
	TemplateID int64
	AccountID  int64
	FirstName  *string
	LastName   *string
	Variables  map[string]string
	ImageURL   string
	VideoURL   string
	URL, URL2  string
}

// BatchSend is a validated batch send.
type BatchSend struct {
	Messages    []BatchMessage
	IsForced    bool
	ScheduledAt *time.Time
}

// SendBatch accepts a batch send: every campaign, template and messaging
// account a message names must be the company's (else a *RefNotFoundError
// naming the first message that names an unknown one), and every account
// named directly must be connected (else a *ConfigError). Each number is
// sent one message, its first entry's: later entries of a number are
// dropped (phone.FirstOfEach). The campaign dispatcher sends them under
// campaign rules (opt-out, delivery hours) unless IsForced.
func (s *Service) SendBatch(ctx context.Context, m Meta, req BatchSend) (Accepted, error) {
	if err := s.checkBatch(ctx, m.CompanyID, req.Messages); err != nil {
		return Accepted{}, err
	}
	kept, phones, _ := phone.FirstOfEach(req.Messages, func(bm BatchMessage) string { return bm.Phone }) // validated already
	msgs := make([]*sendsv1.BatchMessage, len(kept))
	for i, bm := range kept {
		msgs[i] = &sendsv1.BatchMessage{
			Phone: phones[i], CampaignId: bm.CampaignID, TemplateId: bm.TemplateID, MessagingAccountId: bm.AccountID,
			FirstName: bm.FirstName, LastName: bm.LastName, Variables: bm.Variables,
			ImageUrl: bm.ImageURL, VideoUrl: bm.VideoURL, Url: bm.URL, Url2: bm.URL2,
		}
	}
	return s.publishMessages(ctx, m, bus.SourceBatchSend, msgs, req.IsForced, req.ScheduledAt)
}

// checkBatch looks every record up once, in message order.
func (s *Service) checkBatch(ctx context.Context, companyID int64, msgs []BatchMessage) error {
	type ref struct {
		field string
		id    int64
	}
	seen := map[ref]bool{}
	var probs []Problem
	for i, bm := range msgs {
		refs := []ref{{"template_id", bm.TemplateID}, {"messaging_account_id", bm.AccountID}}
		if bm.ByCampaign {
			refs = []ref{{"campaign_id", bm.CampaignID}}
		}
		for _, r := range refs {
			if seen[r] {
				continue
			}
			seen[r] = true
			var err, notFound error
			connected := true
			switch r.field {
			case "campaign_id":
				_, err = s.catalog.Campaign(ctx, companyID, r.id)
				notFound = ErrCampaignNotFound
			case "template_id":
				_, err = s.catalog.Template(ctx, companyID, r.id)
				notFound = ErrTemplateNotFound
			default:
				var a catalog.MessagingAccount
				a, err = s.catalog.MessagingAccount(ctx, companyID, r.id)
				notFound, connected = ErrAccountNotFound, a.Connected
			}
			if errors.Is(err, catalog.ErrNotFound) {
				return &RefNotFoundError{Err: notFound, Index: i, Field: r.field, ID: r.id}
			}
			if err != nil {
				return fmt.Errorf("load %s %d: %w", r.field, r.id, err)
			}
			if !connected {
				probs = append(probs, Problem{Type: "messaging_account_disconnected", Loc: []any{"body", "messages", i, r.field},
					Msg: fmt.Sprintf("Messaging account %d is not connected", r.id), Input: r.id})
			}
		}
	}
	if len(probs) > 0 {
		return &ConfigError{Problems: probs}
	}
	return nil
}

// publishMessages hands a MessageBatch from source to the campaign dispatcher.
func (s *Service) publishMessages(ctx context.Context, m Meta, source bus.Source, msgs []*sendsv1.BatchMessage, forced bool, at *time.Time) (Accepted, error) {
	now := s.now().UTC()
	msg := &sendsv1.MessageBatch{
		BatchId:        m.BatchID,
		CompanyId:      m.CompanyID,
		Messages:       msgs,
		IsForced:       forced,
		AcceptedAt:     timestamppb.New(now),
		IdempotencyKey: m.IdempotencyKey,
		Source:         string(source),
	}
	scheduled := future(at, now)
	if scheduled != nil {
		msg.ScheduledAt = timestamppb.New(*scheduled)
	}
	batchID, err := s.publisher.Publish(ctx, bus.KindMessageBatches, m.CompanyID, m.BatchID, msg)
	if err != nil {
		return Accepted{BatchID: batchID}, err
	}
	return Accepted{BatchID: batchID, Contacts: len(msgs)}, nil
}

// ConnectorSend is a validated connector send: the automation trigger's
// body without automation_id.
type ConnectorSend struct {
	Contacts           []AutomationContact
	ImageURL, VideoURL string
	URL, URL2          string
}

// SendViaConnector accepts a send through the company's connector name. The
// connector must exist and be connected (else ErrConnectorNotConnected) and
// have a target (else a *ConfigError):
//   - a target automation must be active, and is then triggered exactly as
//     POST /api/automations/send triggers it (first 50 contacts, contacts
//     created and merged, rules bypassed, trigger variables required);
//   - a target campaign is sent to the contacts as a batch send (up to 1000,
//     one message per number, its first entry's as in a trigger), under
//     campaign rules, never forced; names, variables and media personalise
//     the message only.
//
// Its batches record bus.ConnectorSource(name) as their source.
func (s *Service) SendViaConnector(ctx context.Context, m Meta, name string, req ConnectorSend) (Accepted, error) {
	conn, err := s.catalog.Connector(ctx, m.CompanyID, name)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && !conn.Connected) {
		return Accepted{}, ErrConnectorNotConnected
	}
	if err != nil {
		return Accepted{}, fmt.Errorf("load connector %q: %w", name, err)
	}
	where := []any{"path", "connector"}
	switch {
	case conn.TargetAutomationID != nil:
		au, err := s.catalog.Automation(ctx, m.CompanyID, *conn.TargetAutomationID)
		if errors.Is(err, catalog.ErrNotFound) || (err == nil && !au.Active) {
			return Accepted{}, &ConfigError{Problems: []Problem{{Type: "connector_target_inactive", Loc: where,
				Msg: fmt.Sprintf("The target automation %d of connector %s is not active", *conn.TargetAutomationID, name), Input: name}}}
		}
		if err != nil {
			return Accepted{}, fmt.Errorf("load automation %d: %w", *conn.TargetAutomationID, err)
		}
		return s.trigger(ctx, m, bus.ConnectorSource(name), au, AutomationTrigger{AutomationID: au.ID, Contacts: req.Contacts,
			ImageURL: req.ImageURL, VideoURL: req.VideoURL, URL: req.URL, URL2: req.URL2}, where, name)
	case conn.TargetCampaignID != nil:
		return s.publishMessages(ctx, m, bus.ConnectorSource(name), campaignMessages(*conn.TargetCampaignID, req), false, nil)
	}
	return Accepted{}, &ConfigError{Problems: []Problem{{Type: "connector_target_missing", Loc: where,
		Msg: fmt.Sprintf("Connector %s has no target automation or campaign", name), Input: name}}}
}

// campaignMessages turns a connector send into one campaign message per
// number, its first entry's (phone.FirstOfEach), as a trigger does.
func campaignMessages(campaignID int64, req ConnectorSend) []*sendsv1.BatchMessage {
	kept, phones, _ := phone.FirstOfEach(req.Contacts, func(c AutomationContact) string { return c.Phone }) // validated already
	out := make([]*sendsv1.BatchMessage, len(kept))
	for i, c := range kept {
		bm := &sendsv1.BatchMessage{Phone: phones[i], CampaignId: campaignID, ImageUrl: req.ImageURL, VideoUrl: req.VideoURL,
			Url: req.URL, Url2: req.URL2, Variables: c.Variables}
		if c.FirstName != nil && *c.FirstName != "" {
			bm.FirstName = c.FirstName
		}
		if c.LastName != nil && *c.LastName != "" {
			bm.LastName = c.LastName
		}
		if c.ImageURL != "" {
			bm.ImageUrl = c.ImageURL
		}
		if c.VideoURL != "" {
			bm.VideoUrl = c.VideoURL
		}
		out[i] = bm
	}
	return out
}
