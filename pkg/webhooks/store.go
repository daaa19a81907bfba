package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// RotationOverlap is how long a rotated-out secret keeps signing beside the
// new one.
const RotationOverlap = 24 * time.Hour

// MaxDescriptionLength is the longest endpoint description accepted.
const MaxDescriptionLength = 500

// TestEventType is the type of the event "send a test event" sends when no
// other type is chosen.
const TestEventType = "webhook.test"

// ExcerptLength is the most of a response body an attempt keeps.
const ExcerptLength = 1024

// Errors of the store.
var (
	ErrCompanyNotFound = errors.New("company not found")
	ErrNotFound        = errors.New("webhook endpoint not found")
	// ErrTooManyEndpoints is a creation beyond Config.MaxEndpoints.
	ErrTooManyEndpoints = errors.New("the company has the most webhook endpoints allowed")
	// ErrDisabled is a test event asked for a disabled endpoint.
	ErrDisabled = errors.New("the webhook endpoint is disabled")
)

// FieldError is one invalid input field.
type FieldError struct {
	Field string
	Msg   string
}

// ValidationError lists every invalid field of an input: a 422 at the edge.
type ValidationError struct{ Fields []FieldError }

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Msg
	}
	return "invalid webhook endpoint: " + strings.Join(parts, "; ")
}

// Endpoint is a company's webhook endpoint, never its secret.
type Endpoint struct {
	ID          string
	CompanyID   int64
	URL         string
	Description string
	// EventTypes are the types sent to it; empty means every type.
	EventTypes []string
	Enabled    bool
	// DisabledReason says why the sender disabled it; empty when an admin
	// did or when it is enabled.
	DisabledReason string
	DisabledAt     *time.Time
	LastError      string
	FailingSince   *time.Time
	// SecretHint is the end of the current signing secret.
	SecretHint string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Wants reports whether the endpoint subscribes to events of type t.
func (e Endpoint) Wants(t string) bool {
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, t)
}

// Input is a new endpoint.
type Input struct {
	URL         string
	Description string
	EventTypes  []string
	// Enabled defaults to true.
	Enabled *bool
}

// Patch is a change of an endpoint; nil fields stay as they are.
type Patch struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	Enabled     *bool
}

// Status is a delivery's or an attempt's outcome.
type Status string

// Delivery and attempt statuses.
const (
	StatusPending   Status = "pending"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Delivery is one event owed to one endpoint.
type Delivery struct {
	ID               int64
	EndpointID       string
	CompanyID        int64
	EventID          string
	EventType        string
	Payload          json.RawMessage
	Status           Status
	Attempts         int
	NextAttemptAt    *time.Time
	QueuedAt         time.Time
	LastResponseCode *int
	LastLatencyMS    *int
	LastError        string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	ID           int64
	DeliveryID   int64
	EndpointID   string
	EventID      string
	EventType    string
	Status       Status
	ResponseCode *int
	LatencyMS    int
	Excerpt      string
	Error        string
	AttemptedAt  time.Time
}

// Store keeps endpoints, secrets, deliveries and attempts in PostgreSQL.
type Store struct {
	pool     *pgxpool.Pool
	box      *secretbox.Box
	cfg      Config
	now      func() time.Time
	resolver Resolver
}

// NewStore returns a store. box seals the signing secrets.
func NewStore(pool *pgxpool.Pool, box *secretbox.Box, cfg Config) *Store {
	return &Store{pool: pool, box: box, cfg: cfg, now: time.Now}
}

// WithClock sets the store's clock (tests: rotation overlap, retention).
func (s *Store) WithClock(now func() time.Time) *Store { s.now = now; return s }

// WithResolver sets how endpoint host names are resolved at validation.
func (s *Store) WithResolver(r Resolver) *Store { s.resolver = r; return s }

// Config is the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

const endpointColumns = `e.id::text, e.company_id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason,
	e.disabled_at, e.last_error, e.failing_since, e.created_at, e.updated_at,
	COALESCE((SELECT hint FROM webhook_secrets s WHERE s.endpoint_id = e.id AND s.expires_at IS NULL ORDER BY s.id DESC LIMIT 1), '')`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.ID, &e.CompanyID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.DisabledAt, &e.LastError, &e.FailingSince, &e.CreatedAt, &e.UpdatedAt, &e.SecretHint)
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	return e, err
}

// validate checks and normalises the fields given; nil ones are skipped.
func (s *Store) validate(ctx context.Context, url, description *string, types *[]string) error {
	var fields []FieldError
	if url != nil {
		v, err := ValidateURL(ctx, *url, s.cfg.AllowPrivate, s.resolver)
		var ue *URLError
		switch {
		case errors.As(err, &ue):
			fields = append(fields, FieldError{Field: "url", Msg: ue.Reason})
		case err != nil:
			return err
		default:
			*url = v
		}
	}
	if description != nil {
		*description = strings.TrimSpace(*description)
		if n := len([]rune(*description)); n > MaxDescriptionLength {
			fields = append(fields, FieldError{Field: "description", Msg: fmt.Sprintf("description is %d characters long, the limit is %d", n, MaxDescriptionLength)})
		}
	}
	if types != nil {
		out := []string{}
		for _, t := range *types {
			t = strings.TrimSpace(t)
			if !events.Type(t).Valid() {
				fields = append(fields, FieldError{Field: "event_types", Msg: fmt.Sprintf("unknown event type %q (known: %s)", t, knownTypes())})
				continue
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		*types = out
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	return nil
}

func knownTypes() string {
	names := make([]string, len(events.Types))
	for i, t := range events.Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// sealNew makes a new secret and its sealed form and hint.
func (s *Store) sealNew() (secret string, sealed []byte, hint string, err error) {
	if secret, err = NewSecret(); err != nil {
		return "", nil, "", err
	}
	if sealed, err = s.box.Seal(secret); err != nil {
		return "", nil, "", fmt.Errorf("seal webhook secret: %w", err)
	}
	return secret, sealed, secret[len(secret)-4:], nil
}

// Create adds an endpoint to the company and returns its signing secret,
// which is never available again: show it once, never log it.
func (s *Store) Create(ctx context.Context, companyID int64, in Input) (string, Endpoint, error) {
	types := in.EventTypes
	if types == nil {
		types = []string{}
	}
	if err := s.validate(ctx, &in.URL, &in.Description, &types); err != nil {
		return "", Endpoint{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	secret, sealed, hint, err := s.sealNew()
	if err != nil {
		return "", Endpoint{}, err
	}
	var ep Endpoint
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The company row's lock serialises concurrent creations, so the
		// count below holds until the commit.
		if err := tx.QueryRow(ctx, `SELECT id FROM companies WHERE id = $1 FOR UPDATE`, companyID).Scan(new(int64)); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrCompanyNotFound
			}
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints WHERE company_id = $1`, companyID).Scan(&n); err != nil {
			return err
		}
		if n >= s.cfg.MaxEndpoints {
			return ErrTooManyEndpoints
		}
		now := s.now().UTC()
		var id string
		if err := tx.QueryRow(ctx, `
			INSERT INTO webhook_endpoints (company_id, url, description, event_types, enabled, disabled_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 THEN NULL ELSE $6::timestamptz END, $6, $6) RETURNING id::text`,
			companyID, in.URL, in.Description, types, enabled, now).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_secrets (endpoint_id, sealed, hint, created_at) VALUES ($1, $2, $3, $4)`,
			id, sealed, hint, now); err != nil {
			return err
		}
		ep, err = scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE e.id = $1`, id))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrCompanyNotFound) || errors.Is(err, ErrTooManyEndpoints) {
			return "", Endpoint{}, err
		}
		return "", Endpoint{}, fmt.Errorf("create webhook endpoint for company %d: %w", companyID, err)
	}
	return secret, ep, nil
}

// companyExists returns ErrCompanyNotFound for a company that does not exist.
func (s *Store) companyExists(ctx context.Context, companyID int64) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM companies WHERE id = $1)`, companyID).Scan(&ok); err != nil {
		return fmt.Errorf("load company %d: %w", companyID, err)
	}
	if !ok {
		return ErrCompanyNotFound
	}
	return nil
}

// List returns the company's endpoints, oldest first.
func (s *Store) List(ctx context.Context, companyID int64) ([]Endpoint, error) {
	if err := s.companyExists(ctx, companyID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE e.company_id = $1 ORDER BY e.created_at, e.id`, companyID)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of company %d: %w", companyID, err)
	}
	eps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of company %d: %w", companyID, err)
	}
	return eps, nil
}

// validID reports whether id is a UUID, so that a malformed id is a
// not-found rather than a database error.
func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

// Get returns one of the company's endpoints.
func (s *Store) Get(ctx context.Context, companyID int64, id string) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, ErrNotFound
	}
	ep, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE e.company_id = $1 AND e.id = $2`, companyID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("load webhook endpoint %s: %w", id, err)
	}
	return ep, nil
}

// Endpoint returns an endpoint by id alone, for the sender.
func (s *Store) Endpoint(ctx context.Context, id string) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, ErrNotFound
	}
	ep, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE e.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("load webhook endpoint %s: %w", id, err)
	}
	return ep, nil
}

// Update changes the fields of p that are set. Re-enabling clears the
// disabled notice, as Enable does.
func (s *Store) Update(ctx context.Context, companyID int64, id string, p Patch) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, ErrNotFound
	}
	if err := s.validate(ctx, p.URL, p.Description, p.EventTypes); err != nil {
		return Endpoint{}, err
	}
	var types []string
	if p.EventTypes != nil {
		types = *p.EventTypes
	}
	ep, err := scanEndpoint(s.pool.QueryRow(ctx, `
		WITH u AS (
			UPDATE webhook_endpoints SET
				url = COALESCE($3, url),
				description = COALESCE($4, description),
				event_types = CASE WHEN $5 THEN $6::text[] ELSE event_types END,
				enabled = COALESCE($7, enabled),
				disabled_reason = CASE WHEN $7 IS NULL OR $7 = enabled THEN disabled_reason ELSE '' END,
				disabled_at = CASE WHEN $7 IS NULL OR $7 = enabled THEN disabled_at WHEN $7 THEN NULL ELSE $8 END,
				failing_since = CASE WHEN $7 AND NOT enabled THEN NULL ELSE failing_since END,
				updated_at = $8
			WHERE company_id = $1 AND id = $2 RETURNING *)
		SELECT `+endpointColumns+` FROM u e`,
		companyID, id, p.URL, p.Description, p.EventTypes != nil, types, p.Enabled, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("update webhook endpoint %s: %w", id, err)
	}
	return ep, nil
}

// Delete removes an endpoint with its secrets, deliveries and attempts.
func (s *Store) Delete(ctx context.Context, companyID int64, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE company_id = $1 AND id = $2`, companyID, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// RotateSecret gives the endpoint a new signing secret and returns it (shown
// once). The previous one keeps signing beside it for RotationOverlap; one
// rotated earlier keeps its own expiry.
func (s *Store) RotateSecret(ctx context.Context, companyID int64, id string) (string, Endpoint, error) {
	if !validID(id) {
		return "", Endpoint{}, ErrNotFound
	}
	secret, sealed, hint, err := s.sealNew()
	if err != nil {
		return "", Endpoint{}, err
	}
	var ep Endpoint
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now().UTC()
		tag, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET updated_at = $3 WHERE company_id = $1 AND id = $2`, companyID, id, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_secrets SET expires_at = $2 WHERE endpoint_id = $1 AND expires_at IS NULL`,
			id, now.Add(RotationOverlap)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_secrets (endpoint_id, sealed, hint, created_at) VALUES ($1, $2, $3, $4)`,
			id, sealed, hint, now); err != nil {
			return err
		}
		ep, err = scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE e.id = $1`, id))
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return "", Endpoint{}, err
	}
	if err != nil {
		return "", Endpoint{}, fmt.Errorf("rotate secret of webhook endpoint %s: %w", id, err)
	}
	return secret, ep, nil
}

// ActiveSecrets returns the HMAC keys that sign the endpoint's deliveries at
// now, newest first: the current secret and any rotated one still within its
// overlap. Pass them all to Sign.
func (s *Store) ActiveSecrets(ctx context.Context, endpointID string, now time.Time) ([][]byte, error) {
	if !validID(endpointID) {
		return nil, ErrNotFound
	}
	rows, err := s.pool.Query(ctx, `
		SELECT sealed FROM webhook_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > $2)
		ORDER BY id DESC`, endpointID, now)
	if err != nil {
		return nil, fmt.Errorf("secrets of webhook endpoint %s: %w", endpointID, err)
	}
	sealed, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("secrets of webhook endpoint %s: %w", endpointID, err)
	}
	keys := make([][]byte, 0, len(sealed))
	for _, b := range sealed {
		secret, err := s.box.Open(b)
		if err != nil {
			return nil, fmt.Errorf("open secret of webhook endpoint %s: %w", endpointID, err)
		}
		key, err := ParseSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("secret of webhook endpoint %s: %w", endpointID, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Enable turns an endpoint back on (after the sender disabled it, or an
// admin did) and clears the disabled notice; deliveries that failed while it
// was off stay failed until ReplayFailed.
func (s *Store) Enable(ctx context.Context, companyID int64, id string) (Endpoint, error) {
	on := true
	return s.Update(ctx, companyID, id, Patch{Enabled: &on})
}

// Disable turns an endpoint off for the sender, with the reason shown to
// admins and the last error seen.
func (s *Store) Disable(ctx context.Context, endpointID, reason, lastError string) error {
	if !validID(endpointID) {
		return ErrNotFound
	}
	now := s.now().UTC()
	tag, err := s.pool.Exec(ctx, `
		UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, disabled_at = $3,
			last_error = CASE WHEN $4 = '' THEN last_error ELSE $4 END, updated_at = $3
		WHERE id = $1`, endpointID, reason, now, lastError)
	if err != nil {
		return fmt.Errorf("disable webhook endpoint %s: %w", endpointID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// ReplayFailed queues again the endpoint's failed deliveries created within
// [from, to): pending, due now, with a fresh retry period. It returns how
// many were queued.
func (s *Store) ReplayFailed(ctx context.Context, companyID int64, id string, from, to time.Time) (int64, error) {
	if !validID(id) {
		return 0, ErrNotFound
	}
	if !from.Before(to) {
		return 0, &ValidationError{Fields: []FieldError{{Field: "to", Msg: "to must be after from"}}}
	}
	if _, err := s.Get(ctx, companyID, id); err != nil {
		return 0, err
	}
	now := s.now().UTC()
	tag, err := s.pool.Exec(ctx, `
		UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $4, queued_at = $4, attempts = 0, updated_at = $4
		WHERE endpoint_id = $1 AND status = 'failed' AND created_at >= $2 AND created_at < $3`, id, from, to, now)
	if err != nil {
		return 0, fmt.Errorf("replay deliveries of webhook endpoint %s: %w", id, err)
	}
	return tag.RowsAffected(), nil
}

// Body is the JSON body of a delivery: {"type", "timestamp", "data"}.
type Body struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// MarshalBody returns the body of an event of type t that happened at at.
func MarshalBody(t string, at time.Time, data any) ([]byte, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("marshal %s event data: %w", t, err)
	}
	return json.Marshal(Body{Type: t, Timestamp: at.UTC(), Data: raw})
}

// SampleData is the data of a test event of type t: the shape of a real one
// with made-up values.
func SampleData(t string, at time.Time) any {
	at = at.UTC()
	const batch = "00000000-0000-7000-8000-000000000000"
	switch events.Type(t) {
	case events.MessageSent, events.MessageDelivered, events.MessageRead:
		return events.Message{BatchID: batch, MessageID: 1, Phone: "+15550000000", State: strings.TrimPrefix(t, "message."),
			ProviderMessageID: "wamid.test", ChangedAt: at}
	case events.MessageFailed:
		return events.Message{BatchID: batch, MessageID: 1, Phone: "+15550000000", State: "failed",
			Error: &events.Error{Code: 131026, Title: "Message undeliverable"}, ChangedAt: at}
	case events.MessageSkipped:
		return events.Message{BatchID: batch, MessageID: 1, Phone: "+15550000000", State: "skipped_opt_out", ChangedAt: at}
	case events.BatchCompleted, events.BatchFailed, events.BatchCancelled:
		return events.Batch{BatchID: batch, Kind: "campaign", Status: strings.TrimPrefix(t, "batch."), Counts: map[string]int{"sent": 1}, ChangedAt: at}
	case events.ContactOptedOut, events.ContactOptedIn:
		return events.Contact{Phone: "+15550000000", OptedOut: t == string(events.ContactOptedOut), Reason: "operator", ChangedAt: at}
	case events.MessageReceived:
		return events.Received{MessageID: 2, Wamid: "wamid.test.in", Phone: "+15550000000", ProfileName: "Test",
			MessagingAccountID: 1, MessagingAccountName: "Test number", Type: "text",
			Content: json.RawMessage(`{"type":"text","text":{"body":"This is a test"}}`), SentAt: at, ReceivedAt: at,
			WindowExpiresAt: at.Add(24 * time.Hour)}
	case events.TemplateStatusChanged:
		until := at.Add(3 * time.Hour)
		return events.Template{TemplateID: 1, Name: "spring_sale", Language: "en_US", Category: "MARKETING", Status: "PAUSED",
			PreviousStatus: "APPROVED", Reason: "FIRST_PAUSE", PausedUntil: &until, ChangedAt: at}
	case events.BatchHeld, events.BatchReleased:
		return events.Hold{BatchID: batch, Reason: "template_paused", Messages: 1, TemplateID: 1, TemplateName: "spring_sale", ChangedAt: at}
	default:
		return map[string]any{"test": true, "changed_at": at}
	}
}

const deliveryColumns = `id, endpoint_id::text, company_id, event_id::text, event_type, payload, status, attempts, next_attempt_at,
	queued_at, last_response_code, last_latency_ms, last_error, created_at, updated_at`

func scanDelivery(row pgx.Row) (Delivery, error) {
	var d Delivery
	var status string
	err := row.Scan(&d.ID, &d.EndpointID, &d.CompanyID, &d.EventID, &d.EventType, &d.Payload, &status, &d.Attempts,
		&d.NextAttemptAt, &d.QueuedAt, &d.LastResponseCode, &d.LastLatencyMS, &d.LastError, &d.CreatedAt, &d.UpdatedAt)
	d.Status = Status(status)
	return d, err
}

// SendTest queues a test event for this endpoint only: a pending delivery,
// due now, of type t (TestEventType when empty, or one of events.Types) with
// sample data. The sender delivers it like any other.
func (s *Store) SendTest(ctx context.Context, companyID int64, id, t string) (Delivery, error) {
	if t == "" {
		t = TestEventType
	}
	if t != TestEventType && !events.Type(t).Valid() {
		return Delivery{}, &ValidationError{Fields: []FieldError{{Field: "event_type",
			Msg: fmt.Sprintf("unknown event type %q (known: %s, %s)", t, TestEventType, knownTypes())}}}
	}
	ep, err := s.Get(ctx, companyID, id)
	if err != nil {
		return Delivery{}, err
	}
	if !ep.Enabled {
		return Delivery{}, ErrDisabled
	}
	now := s.now().UTC()
	body, err := MarshalBody(t, now, SampleData(t, now))
	if err != nil {
		return Delivery{}, err
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		return Delivery{}, err
	}
	// Its week (created_at) is now, the event's time in its body: inserted
	// once, with a fresh id, it has no repeat to catch.
	d, err := scanDelivery(s.pool.QueryRow(ctx, `
		INSERT INTO webhook_deliveries (endpoint_id, company_id, event_id, event_type, payload, next_attempt_at, queued_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6, $6, $6) RETURNING `+deliveryColumns,
		ep.ID, companyID, eventID.String(), t, body, now))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return Delivery{}, ErrNotFound // deleted meanwhile
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("queue test event for webhook endpoint %s: %w", id, err)
	}
	return d, nil
}

// Attempts returns the endpoint's attempts, newest first, after cursor (the
// ID of the last attempt of the previous page; 0 for the first page), and
// the cursor of the next page (0 when this is the last).
func (s *Store) Attempts(ctx context.Context, companyID int64, id string, cursor int64, limit int) ([]Attempt, int64, error) {
	if _, err := s.Get(ctx, companyID, id); err != nil {
		return nil, 0, err
	}
	if limit < 1 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, delivery_id, endpoint_id::text, event_id::text, event_type, status, response_code, latency_ms, excerpt, error, attempted_at
		FROM webhook_attempts WHERE endpoint_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, id, cursor, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("attempts of webhook endpoint %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		var status string
		err := r.Scan(&a.ID, &a.DeliveryID, &a.EndpointID, &a.EventID, &a.EventType, &status, &a.ResponseCode, &a.LatencyMS,
			&a.Excerpt, &a.Error, &a.AttemptedAt)
		a.Status = Status(status)
		return a, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("attempts of webhook endpoint %s: %w", id, err)
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// Deliveries returns the endpoint's latest deliveries, newest first, of one
// status ("" for all).
func (s *Store) Deliveries(ctx context.Context, companyID int64, id string, status Status, limit int) ([]Delivery, error) {
	if _, err := s.Get(ctx, companyID, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE endpoint_id = $1 AND ($2 = '' OR status = $2) ORDER BY id DESC LIMIT $3`, id, string(status), limit)
	if err != nil {
		return nil, fmt.Errorf("deliveries of webhook endpoint %s: %w", id, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) { return scanDelivery(r) })
}

// Subscribers returns the company's enabled endpoints that want events of
// type t.
func (s *Store) Subscribers(ctx context.Context, companyID int64, t string) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e
		WHERE e.company_id = $1 AND e.enabled AND (cardinality(e.event_types) = 0 OR $2 = ANY (e.event_types))
		ORDER BY e.created_at, e.id`, companyID, t)
	if err != nil {
		return nil, fmt.Errorf("subscribers of company %d: %w", companyID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
}

// AttemptResult is the outcome of one HTTP attempt, for RecordAttempt.
type AttemptResult struct {
	DeliveryID   int64
	Succeeded    bool
	ResponseCode *int
	Latency      time.Duration
	// Excerpt is the start of the response body; cut to ExcerptLength.
	Excerpt string
	// Error is the connection error or a description of the refusal.
	Error string
	At    time.Time
	// NextAttemptAt is when to retry a failed attempt; nil when the
	// delivery is given up (failed for good).
	NextAttemptAt *time.Time
}

// RecordAttempt records an attempt and moves its delivery on: succeeded,
// pending until NextAttemptAt, or failed. The endpoint's failure streak
// (FailingSince, LastError) follows.
func (s *Store) RecordAttempt(ctx context.Context, r AttemptResult) error {
	excerpt := truncate(r.Excerpt, ExcerptLength)
	errText := truncate(r.Error, ExcerptLength)
	status := StatusFailed
	delStatus := StatusFailed
	switch {
	case r.Succeeded:
		status, delStatus = StatusSucceeded, StatusSucceeded
	case r.NextAttemptAt != nil:
		delStatus = StatusPending
	}
	latency := int(r.Latency.Milliseconds())
	at := r.At.UTC()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var endpoint, eventID, eventType string
		var created time.Time
		// By id alone (unique across the weeks): every week's index is
		// looked at, which the sender, knowing the week, avoids.
		err := tx.QueryRow(ctx, `
			UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1, next_attempt_at = $3,
				last_response_code = $4, last_latency_ms = $5, last_error = $6, updated_at = $7
			WHERE id = $1 RETURNING endpoint_id::text, event_id::text, event_type, created_at`,
			r.DeliveryID, string(delStatus), r.NextAttemptAt, r.ResponseCode, latency, errText, at).Scan(&endpoint, &eventID, &eventType, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("record attempt of delivery %d: %w", r.DeliveryID, err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO webhook_attempts (delivery_id, delivery_created_at, endpoint_id, event_id, event_type, status, response_code,
				latency_ms, excerpt, error, attempted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			r.DeliveryID, created, endpoint, eventID, eventType, string(status), r.ResponseCode, latency, excerpt, errText, at); err != nil {
			return fmt.Errorf("record attempt of delivery %d: %w", r.DeliveryID, err)
		}
		if r.Succeeded {
			_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, endpoint)
		} else {
			_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, $2), last_error = $3 WHERE id = $1`,
				endpoint, at, attemptError(r))
		}
		return err
	})
}

func attemptError(r AttemptResult) string {
	if r.Error != "" {
		return truncate(r.Error, ExcerptLength)
	}
	if r.ResponseCode != nil {
		return truncate(fmt.Sprintf("HTTP %d: %s", *r.ResponseCode, r.Excerpt), ExcerptLength)
	}
	return "failed"
}

// truncate cuts s to at most n bytes without splitting a UTF-8 character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8ValidEnd(s) {
		s = s[:len(s)-1]
	}
	return s
}

func utf8ValidEnd(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s
}
