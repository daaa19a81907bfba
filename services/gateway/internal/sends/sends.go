// Package sends is the gateway's use case: accept a validated campaign send,
// automation trigger, batch send or connector send for a company, check what
// it names, and hand it to the dispatchers through the SENDS stream. It
// knows nothing of HTTP.
package sends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/phone"
	"github.com/parleyhq/parley/services/gateway/internal/accept"
)

// MaxAutomationContacts is how many contacts of a trigger are processed
// (spec 4.1): the rest of a request are accepted by the schema but ignored.
const MaxAutomationContacts = 50

// Domain errors, turned into statuses and texts at the HTTP edge (all 404s).
var (
	ErrCampaignNotFound   = errors.New("campaign not found")
	ErrAutomationNotFound = errors.New("automation not found")
	ErrSegmentNotFound    = errors.New("segment not found")
	ErrTemplateNotFound   = errors.New("template not found")
	ErrAccountNotFound    = errors.New("messaging account not found")
	// ErrConnectorNotConnected is a connector the company does not have, or
	// has but not connected: the same answer, so that a caller cannot probe
	// which connectors exist.
	ErrConnectorNotConnected = errors.New("connector not connected")
	// ErrUnavailable: the stream did not take the batch; nothing was accepted.
	ErrUnavailable = accept.ErrUnavailable
)

// Problem is one reason a request cannot be served as asked, in the shape of
// a 422 detail item.
type Problem struct {
	Type  string
	Loc   []any
	Msg   string
	Input any
}

// ConfigError is an automation (or connector) that cannot send as
// configured, contacts that lack its trigger variables, or a batch message
// whose messaging account is disconnected (422).
type ConfigError struct{ Problems []Problem }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("cannot be sent as configured: %d problem(s), first: %s", len(e.Problems), e.Problems[0].Msg)
}

// RefNotFoundError is a record named by one message of a batch send that
// the company does not have. It unwraps to ErrCampaignNotFound,
// ErrTemplateNotFound or ErrAccountNotFound.
type RefNotFoundError struct {
	Err   error
	Index int
	Field string
	ID    int64
}

// Where names the message and field: "messages[3].campaign_id".
func (e *RefNotFoundError) Where() string {
	return fmt.Sprintf("messages[%d].%s", e.Index, e.Field)
}

func (e *RefNotFoundError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Err, e.Where(), e.ID)
}

func (e *RefNotFoundError) Unwrap() error { return e.Err }

// Catalog is what the use case reads. Every read is scoped by company:
// another company's record is catalog.ErrNotFound.
type Catalog interface {
	Campaign(ctx context.Context, companyID, id int64) (catalog.Campaign, error)
	Automation(ctx context.Context, companyID, id int64) (catalog.Automation, error)
	Template(ctx context.Context, companyID, id int64) (catalog.Template, error)
	MessagingAccount(ctx context.Context, companyID, id int64) (catalog.MessagingAccount, error)
	Connector(ctx context.Context, companyID int64, name string) (catalog.Connector, error)
}

// Segments sizes a company's segment (catalog.ErrNotFound for another
// company's or an unknown one).
type Segments interface {
	Size(ctx context.Context, companyID, segmentID int64) (int, error)
}

// Publisher puts a company's batch of a subject kind on the stream and
// returns its id once it is acknowledged (accept.Publisher): with batchID
// empty the publisher gives the batch its id (m leaves it unset), else m
// carries batchID. It returns the id with an error too when the batch may
// be in the stream.
type Publisher interface {
	Publish(ctx context.Context, kind string, companyID int64, batchID string, m bus.BatchMessage) (string, error)
}

// Service accepts sends.
type Service struct {
	catalog   Catalog
	segments  Segments
	publisher Publisher
	now       func() time.Time
}

// New returns the use case.
func New(c Catalog, seg Segments, p Publisher, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{catalog: c, segments: seg, publisher: p, now: now}
}

// Meta is what a request carries besides its body.
type Meta struct {
	CompanyID      int64
	IdempotencyKey string
	// BatchID, when set, is reused (a retried publish that ended in doubt).
	BatchID string
}

// Accepted is the 202.
type Accepted struct {
	BatchID  string
	Contacts int
}

// CampaignSend is a validated campaign send: to Contacts, or to the
// members of SegmentID.
type CampaignSend struct {
	// CampaignID 0 (also what an integer beyond int64 decodes to) is no record.
	CampaignID  int64
	Contacts    []string
	SegmentID   *int64
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
// contacts are normalised to E.164 with '+' and each number is kept once
// (phone.FirstOfEach, the duplicate rule of every send). A
// send to a segment (which must be the company's too) counts the segment's
// members now; the dispatcher expands the segment as it is when it takes
// the batch (moments later, also for a scheduled send), so members added or
// removed between acceptance and expansion are included or left out.
func (s *Service) SendCampaign(ctx context.Context, m Meta, req CampaignSend) (Accepted, error) {
	if _, err := s.catalog.Campaign(ctx, m.CompanyID, req.CampaignID); err != nil {
		if errors.Is(err, catalog.ErrNotFound) {
			return Accepted{}, ErrCampaignNotFound
		}
		return Accepted{}, fmt.Errorf("load campaign %d: %w", req.CampaignID, err)
	}
	_, phones, _ := phone.FirstOfEach(req.Contacts, phone.Itself) // validated already
	count := len(phones)
	var segmentID int64
	if req.SegmentID != nil {
		segmentID = *req.SegmentID
		size, err := s.segments.Size(ctx, m.CompanyID, segmentID)
		if errors.Is(err, catalog.ErrNotFound) {
			return Accepted{}, ErrSegmentNotFound
		}
		if err != nil {
			return Accepted{}, fmt.Errorf("size segment %d: %w", segmentID, err)
		}
		count, phones = size, nil
	}
	segmentSize := 0
	if segmentID != 0 {
		segmentSize = count
	}
	now := s.now().UTC()
	msg := &sendsv1.CampaignBatch{
		BatchId:        m.BatchID,
		CompanyId:      m.CompanyID,
		CampaignId:     req.CampaignID,
		Phones:         phones,
		SegmentId:      segmentID,
		SegmentSize:    int32(segmentSize),
		IsForced:       req.IsForced,
		AcceptedAt:     timestamppb.New(now),
		IdempotencyKey: m.IdempotencyKey,
		Source:         string(bus.SourceCampaignsSend),
	}
	scheduled := future(req.ScheduledAt, now)
	if scheduled != nil {
		msg.ScheduledAt = timestamppb.New(*scheduled)
	}
	batchID, err := s.publisher.Publish(ctx, bus.KindCampaignBatches, m.CompanyID, m.BatchID, msg)
	if err != nil {
		return Accepted{BatchID: batchID}, err
	}
	return Accepted{BatchID: batchID, Contacts: count}, nil
}

// future is a requested send time in UTC, or nil for "now": a time in the
// past means now (spec 4.2: omitted is immediate).
func future(at *time.Time, now time.Time) *time.Time {
	if at == nil || !at.After(now) {
		return nil
	}
	t := at.UTC()
	return &t
}

// TriggerAutomation accepts an automation trigger. The automation must be
// the company's, active and of type api (else ErrAutomationNotFound); it
// must have a template and a connected account, and each processed contact
// must supply every trigger variable (else *ConfigError). Only the first
// MaxAutomationContacts contacts are processed and checked; of those, a
// number given more than once is sent to once, with its first entry (names,
// variables, media), the later ones being dropped (phone.FirstOfEach).
func (s *Service) TriggerAutomation(ctx context.Context, m Meta, req AutomationTrigger) (Accepted, error) {
	au, err := s.catalog.Automation(ctx, m.CompanyID, req.AutomationID)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && (!au.Active || au.Type != catalog.TypeAPI)) {
		return Accepted{}, ErrAutomationNotFound
	}
	if err != nil {
		return Accepted{}, fmt.Errorf("load automation %d: %w", req.AutomationID, err)
	}
	return s.trigger(ctx, m, bus.SourceAutomationsSend, au, req, []any{"body", "automation_id"}, au.ID)
}

// trigger accepts a trigger of a loaded automation for source; where and
// input place the automation's configuration problems in a 422 (the
// automation_id of the body, or the connector of the path).
func (s *Service) trigger(ctx context.Context, m Meta, source bus.Source, au catalog.Automation, req AutomationTrigger, where []any, input any) (Accepted, error) {
	contacts := req.Contacts
	if len(contacts) > MaxAutomationContacts {
		contacts = contacts[:MaxAutomationContacts]
	}
	if err := checkAutomation(au, contacts, where, input); err != nil {
		return Accepted{}, err
	}
	contacts, phones, _ := phone.FirstOfEach(contacts, func(c AutomationContact) string { return c.Phone }) // validated already
	now := s.now().UTC()
	msg := &sendsv1.AutomationBatch{
		BatchId:        m.BatchID,
		CompanyId:      m.CompanyID,
		AutomationId:   au.ID,
		Contacts:       make([]*sendsv1.AutomationContact, len(contacts)),
		ImageUrl:       req.ImageURL,
		VideoUrl:       req.VideoURL,
		Url:            req.URL,
		Url2:           req.URL2,
		AcceptedAt:     timestamppb.New(now),
		IdempotencyKey: m.IdempotencyKey,
		Source:         string(source),
	}
	for i, c := range contacts {
		msg.Contacts[i] = &sendsv1.AutomationContact{
			Phone: phones[i], FirstName: c.FirstName, LastName: c.LastName,
			ImageUrl: c.ImageURL, VideoUrl: c.VideoURL, Variables: c.Variables,
		}
	}
	batchID, err := s.publisher.Publish(ctx, bus.KindAutomationBatches, m.CompanyID, m.BatchID, msg)
	if err != nil {
		return Accepted{BatchID: batchID}, err
	}
	return Accepted{BatchID: batchID, Contacts: len(contacts)}, nil
}

func checkAutomation(au catalog.Automation, contacts []AutomationContact, where []any, input any) error {
	var probs []Problem
	if au.TemplateID == nil {
		probs = append(probs, Problem{Type: "automation_template_missing", Loc: where,
			Msg: fmt.Sprintf("Automation %d has no WhatsApp template selected", au.ID), Input: input})
	}
	if au.MessagingAccountID == nil || !au.AccountConnected {
		probs = append(probs, Problem{Type: "automation_account_missing", Loc: where,
			Msg: fmt.Sprintf("Automation %d has no connected WhatsApp account assigned", au.ID), Input: input})
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
