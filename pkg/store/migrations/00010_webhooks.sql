-- +goose Up
-- Companies' webhook endpoints (pkg/webhooks): where Parley sends the events
-- of event_outbox, signed per the Standard Webhooks specification, and the
-- record of every delivery and attempt.

CREATE TABLE webhook_endpoints (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    company_id      bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    url             text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- the event types sent to it; empty means every type.
    event_types     text[]      NOT NULL DEFAULT '{}',
    enabled         boolean     NOT NULL DEFAULT true,
    -- why the sender disabled it (empty when an admin did, or it is enabled).
    disabled_reason text        NOT NULL DEFAULT '',
    disabled_at     timestamptz,
    -- the last failed attempt's error, kept after re-enabling until the next
    -- success clears it.
    last_error      text        NOT NULL DEFAULT '',
    -- the sender's failure streak: when it began (NULL after a success).
    failing_since   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_company_idx ON webhook_endpoints (company_id, created_at);

-- Signing secrets, sealed with pkg/secretbox (PARLEY_TOKEN_KEY): the HMAC
-- needs the plaintext. A rotated secret keeps signing until expires_at; the
-- current one has none.
CREATE TABLE webhook_secrets (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id uuid        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    sealed      bytea       NOT NULL,
    -- the last characters of the secret, to tell secrets apart on screen.
    hint        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE INDEX webhook_secrets_endpoint_idx ON webhook_secrets (endpoint_id, created_at DESC);

-- One row per (endpoint, event): the delivery's state. The sender inserts
-- pending rows and works on those whose next_attempt_at has come; a replay
-- or a test event is a row set (back) to pending. payload is the body sent:
-- {"type", "timestamp", "data"}.
CREATE TABLE webhook_deliveries (
    id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id        uuid        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    company_id         bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- the event's id: the webhook-id header.
    event_id           uuid        NOT NULL,
    event_type         text        NOT NULL CHECK (event_type ~ '^[a-z_]+\.[a-z_]+$'),
    payload            jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    status             text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts           integer     NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz,
    -- when the delivery was (re)queued: its creation, or its replay. The
    -- sender gives up retrying a retry period after it.
    queued_at          timestamptz NOT NULL DEFAULT now(),
    last_response_code integer,
    last_latency_ms    integer,
    last_error         text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, status, created_at);
CREATE INDEX webhook_deliveries_created_idx ON webhook_deliveries (created_at);

-- One row per HTTP attempt, kept for the retention (PARLEY_WEBHOOKS_ATTEMPT_RETENTION).
CREATE TABLE webhook_attempts (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   bigint      NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id   uuid        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      uuid        NOT NULL,
    event_type    text        NOT NULL,
    -- succeeded, or failed (this attempt; the delivery may still be retried).
    status        text        NOT NULL CHECK (status IN ('succeeded', 'failed')),
    response_code integer,
    latency_ms    integer     NOT NULL DEFAULT 0,
    -- the first bytes of the response body, or the connection error.
    excerpt       text        NOT NULL DEFAULT '' CHECK (length(excerpt) <= 1024),
    error         text        NOT NULL DEFAULT '',
    attempted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, id DESC);
CREATE INDEX webhook_attempts_attempted_idx ON webhook_attempts (attempted_at);

-- +goose Down
DROP TABLE webhook_attempts, webhook_deliveries, webhook_secrets, webhook_endpoints;
