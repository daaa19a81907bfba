// Package sends is the gateway's use case: accept a validated campaign send
// or automation trigger for a company, check what it names, and hand it to
// the dispatchers through the SENDS stream. It knows nothing of HTTP.
package sends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/services/gateway/internal/handoff"
)

// MaxAutomationContacts is how many contacts of a trigger are processed
// (spec 4.1): the rest of a request are accepted by the schema but ignored.
const MaxAutomationContacts = 50

// Domain errors, turned into statuses at the HTTP edge.
var (
	ErrCampaignNotFound   = errors.New("Campaign not found")
	ErrAutomationNotFound = errors.New("Automation not found")
	// ErrUnavailable: the stream did not take the batch; nothing was accepted.
	ErrUnavailable = handoff.ErrUnavailable
)

// Problem is one reason a request cannot be served as asked, in the shape of
// a 422 detail item.
type Problem struct {
	Type  string
	Loc   []any
	Msg   string
	Input any
}

// ConfigError is an automation that cannot send as configured, or contacts
// that lack its trigger variables (422).
type ConfigError struct{ Problems []Problem }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("automation cannot be triggered: %d problem(s), first: %s", len(e.Problems), e.Problems[0].Msg)
}

// Catalog is what the use case reads.
type Catalog interface {
	Campaign(ctx context.Context, companyID, id int64) (catalog.Campaign, error)
	Automation(ctx context.Context, companyID, id int64) (catalog.Automation, error)
}

// Publisher puts a batch on the stream and returns once it is acknowledged.
type Publisher interface {
	Publish(ctx context.Context, subject, batchID string, m proto.Message) error
}

// Recorder writes the accepted batch's row in the background.
type Recorder interface {
	Record(handoff.Accepted)
}

// Service accepts sends.
type Service struct {
	catalog   Catalog
	publisher Publisher
	recorder  Recorder
	subjects  bus.Config
	now       func() time.Time
}

// New returns the use case.
func New(c Catalog, p Publisher, r Recorder, subjects bus.Config, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{catalog: c, publisher: p, recorder: r, subjects: subjects, now: now}
}

// Meta is what a request carries besides its body.
type Meta struct {
	CompanyID      int64
	IdempotencyKey string
	// BatchID, when set, is reused (a retried hand-off that ended in doubt).
	BatchID string
	// Source names the endpoint for the record ("api:campaigns/send").
	Source string
}

// Accepted is the 202.
type Accepted struct {
	BatchID  string
	Contacts int
}

// CampaignSend is a validated campaign send.
type CampaignSend struct {
	// CampaignID 0 (also what an integer beyond int64 decodes to) is no record.
	CampaignID  int64
	Contacts    []string
	IsForced    bool
	ScheduledAt *time.Time
}

// AutomationContact is one validated contact of a trigger.
type AutomationContact struct {
	Phone     string
	FirstName *string
	LastName  *string
	ImageURL  string
	VideoURL  string
	Variables map[string]string
}

// AutomationTrigger is a validated automation trigger.
type AutomationTrigger struct {
	AutomationID       int64
	Contacts           []AutomationContact
	ImageURL, VideoURL string
	URL, URL2          string
}

// NewBatchID is unique and sorts by time (UUIDv7).
func NewBatchID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("batch id: %w", err)
	}
	return id.String(), nil
}

// SendCampaign accepts a campaign send: the campaign must be the company's;
// contacts are normalised to E.164 with '+' and de-duplicated in order.
func (s *Service) SendCampaign(ctx context.Context, m Meta, req CampaignSend) (Accepted, error) {
	if _, err := s.catalog.Campaign(ctx, m.CompanyID, req.CampaignID); err != nil {
		if errors.Is(err, catalog.ErrNotFound) {
			return Accepted{}, ErrCampaignNotFound
		}
		return Accepted{}, fmt.Errorf("load campaign %d: %w", req.CampaignID, err)
	}
	phones := dedupe(req.Contacts)
	now := s.now().UTC()
	batchID, err := s.batchID(m)
	if err != nil {
		return Accepted{}, err
	}
	msg := &sendsv1.CampaignBatch{
		BatchId:        batchID,
		CompanyId:      m.CompanyID,
		CampaignId:     req.CampaignID,
		Phones:         phones,
		IsForced:       req.IsForced,
		AcceptedAt:     timestamppb.New(now),
		IdempotencyKey: m.IdempotencyKey,
		Source:         m.Source,
	}
	var scheduled *time.Time
	// A time in the past means now (spec 4.2: omitted is immediate).
	if req.ScheduledAt != nil && req.ScheduledAt.After(now) {
		t := req.ScheduledAt.UTC()
		scheduled = &t
		msg.ScheduledAt = timestamppb.New(t)
	}
	if err := s.publisher.Publish(ctx, s.subjects.CampaignSubject(m.CompanyID), batchID, msg); err != nil {
		return Accepted{BatchID: batchID}, err
	}
	s.recorder.Record(handoff.Accepted{
		ID: batchID, CompanyID: m.CompanyID, Kind: "campaign", Source: m.Source, CampaignID: req.CampaignID,
		ContactCount: len(phones), IsForced: req.IsForced, ScheduledAt: scheduled,
		IdempotencyKey: m.IdempotencyKey, AcceptedAt: now,
	})
	return Accepted{BatchID: batchID, Contacts: len(phones)}, nil
}

// TriggerAutomation accepts an automation trigger. The automation must be
// the company's, active and of type api (else ErrAutomationNotFound); it
// must have a template and a connected account, and each processed contact
// must supply every trigger variable (else *ConfigError). Only the first
// MaxAutomationContacts contacts are processed and checked.
func (s *Service) TriggerAutomation(ctx context.Context, m Meta, req AutomationTrigger) (Accepted, error) {
	au, err := s.catalog.Automation(ctx, m.CompanyID, req.AutomationID)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && (!au.Active || au.Type != catalog.TypeAPI)) {
		return Accepted{}, ErrAutomationNotFound
	}
	if err != nil {
		return Accepted{}, fmt.Errorf("load automation %d: %w", req.AutomationID, err)
	}
	contacts := req.Contacts
	if len(contacts) > MaxAutomationContacts {
		contacts = contacts[:MaxAutomationContacts]
	}
	if err := checkAutomation(au, contacts); err != nil {
		return Accepted{}, err
	}
	now := s.now().UTC()
	batchID, err := s.batchID(m)
	if err != nil {
		return Accepted{}, err
	}
	msg := &sendsv1.AutomationBatch{
		BatchId:        batchID,
		CompanyId:      m.CompanyID,
		AutomationId:   req.AutomationID,
		Contacts:       make([]*sendsv1.AutomationContact, len(contacts)),
		ImageUrl:       req.ImageURL,
		VideoUrl:       req.VideoURL,
		Url:            req.URL,
		Url2:           req.URL2,
		AcceptedAt:     timestamppb.New(now),
		IdempotencyKey: m.IdempotencyKey,
		Source:         m.Source,
	}
	for i, c := range contacts {
		p, _ := phone.Normalize(c.Phone) // validated already
		msg.Contacts[i] = &sendsv1.AutomationContact{
			Phone: p, FirstName: c.FirstName, LastName: c.LastName,
			ImageUrl: c.ImageURL, VideoUrl: c.VideoURL, Variables: c.Variables,
		}
	}
	if err := s.publisher.Publish(ctx, s.subjects.AutomationSubject(m.CompanyID), batchID, msg); err != nil {
		return Accepted{BatchID: batchID}, err
	}
	overrides := map[string]string{}
	for k, v := range map[string]string{"image_url": req.ImageURL, "video_url": req.VideoURL, "url": req.URL, "url2": req.URL2} {
		if v != "" {
			overrides[k] = v
		}
	}
	s.recorder.Record(handoff.Accepted{
		ID: batchID, CompanyID: m.CompanyID, Kind: "automation", Source: m.Source, AutomationID: req.AutomationID,
		ContactCount: len(contacts), IsForced: true, IdempotencyKey: m.IdempotencyKey, AcceptedAt: now, Overrides: overrides,
	})
	return Accepted{BatchID: batchID, Contacts: len(contacts)}, nil
}

func checkAutomation(au catalog.Automation, contacts []AutomationContact) error {
	var probs []Problem
	if au.TemplateID == nil {
		probs = append(probs, Problem{Type: "automation_template_missing", Loc: []any{"body", "automation_id"},
			Msg: fmt.Sprintf("Automation %d has no WhatsApp template selected", au.ID), Input: au.ID})
	}
	if au.MessagingAccountID == nil || !au.AccountConnected {
		probs = append(probs, Problem{Type: "automation_account_missing", Loc: []any{"body", "automation_id"},
			Msg: fmt.Sprintf("Automation %d has no connected WhatsApp account assigned", au.ID), Input: au.ID})
	}
	for i, c := range contacts {
		for _, name := range au.TriggerVariables {
			if _, ok := c.Variables[name]; !ok {
				probs = append(probs, Problem{Type: "missing", Loc: []any{"body", "contacts", i, "variables", name},
					Msg: "Field required", Input: variablesInput(c.Variables)})
			}
		}
	}
	if len(probs) > 0 {
		return &ConfigError{Problems: probs}
	}
	return nil
}

// variablesInput echoes the contact's variables as pydantic echoes the
// enclosing object of a missing field.
func variablesInput(v map[string]string) any {
	if v == nil {
		return map[string]string{}
	}
	return v
}

func (s *Service) batchID(m Meta) (string, error) {
	if m.BatchID != "" {
		return m.BatchID, nil
	}
	return NewBatchID()
}

// dedupe normalises to '+' E.164 and keeps the first occurrence of each number.
func dedupe(contacts []string) []string {
	out := make([]string, 0, len(contacts))
	seen := make(map[string]struct{}, len(contacts))
	for _, c := range contacts {
		p, ok := phone.Normalize(c)
		if !ok {
			continue // validated already; unreachable
		}
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		out = append(out, p)
	}
	return out
}
