-- +goose Up
-- The messages table becomes the durable work queue of the dispatchers: a
-- JetStream batch is acked once its messages are committed here, and each
-- message is then claimed (FOR UPDATE SKIP LOCKED), sent, and recorded.

-- 'failed' is a batch that could not be expanded at all (its campaign or
-- automation disappeared); its messages, if any, say why.
ALTER TYPE batch_status ADD VALUE IF NOT EXISTS 'failed';

ALTER TABLE batches
    -- why a batch failed as a whole; NULL otherwise.
    ADD COLUMN error text,
    -- request-level media and URL-button overrides of an automation trigger.
    ADD COLUMN overrides jsonb CHECK (overrides IS NULL OR jsonb_typeof(overrides) = 'object');

-- Which dispatcher sends a message: campaign sends (and batch and connector
-- sends that target campaigns) respect opt-out and delivery hours unless
-- forced; automation sends bypass both (spec section 1).
CREATE TYPE dispatch_lane AS ENUM ('campaign', 'automation');

ALTER TABLE messages
    ADD COLUMN lane          dispatch_lane NOT NULL DEFAULT 'campaign',
    ADD COLUMN template_id   bigint REFERENCES templates (id),
    -- true for automation sends and forced campaigns: no opt-out, no delivery hours.
    ADD COLUMN bypass_rules  boolean NOT NULL DEFAULT false,
    -- per-message personalisation that is not on the contact: {"first_name",
    -- "last_name", "variables":{...}, "image_url", "video_url", "url", "url2"}.
    ADD COLUMN overrides     jsonb CHECK (overrides IS NULL OR jsonb_typeof(overrides) = 'object'),
    -- when the current claim began; a 'sending' row whose claim is older than
    -- the lease belongs to a dead dispatcher and is sent again.
    ADD COLUMN claimed_at    timestamptz,
    ADD COLUMN skipped_at    timestamptz;

-- Finding due work of one account, oldest first.
CREATE INDEX messages_due_idx ON messages (lane, messaging_account_id, not_before, id)
    WHERE state IN ('queued', 'scheduled', 'deferred');
-- Finding claims that outlived their dispatcher.
CREATE INDEX messages_claimed_idx ON messages (claimed_at) WHERE state = 'sending';
DROP INDEX messages_waiting_idx;

-- Status callbacks that arrived before the dispatcher recorded the wamid
-- they name (the provider can call back faster than we commit). They are
-- applied as soon as the message is recorded, and swept periodically.
CREATE TABLE provider_status_backlog (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider_message_id text        NOT NULL,
    status              text        NOT NULL CHECK (status IN ('sent', 'delivered', 'read', 'failed')),
    error_code          integer,
    error_title         text,
    occurred_at         timestamptz NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_status_backlog_wamid_idx ON provider_status_backlog (provider_message_id);

-- Bus messages a dispatcher could not decode or act on at all; kept for an
-- operator instead of being redelivered forever.
CREATE TABLE rejected_bus_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subject     text        NOT NULL,
    msg_id      text,
    reason      text        NOT NULL,
    payload     bytea       NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now()
);

-- 00001's check on template names used a repetition count PostgreSQL's
-- regular expressions refuse ({1,512}: the limit is 255), so no template
-- could be stored.
ALTER TABLE templates DROP CONSTRAINT templates_name_check;
ALTER TABLE templates ADD CONSTRAINT templates_name_check CHECK (name ~ '^[a-z0-9_]+$' AND length(name) <= 512);

-- +goose Down
-- The template-name fix stays: 00001's original check could not hold a row.
DROP TABLE rejected_bus_messages, provider_status_backlog;
CREATE INDEX messages_waiting_idx ON messages (not_before) WHERE state IN ('scheduled', 'deferred');
DROP INDEX messages_claimed_idx, messages_due_idx;
ALTER TABLE messages DROP COLUMN skipped_at, DROP COLUMN claimed_at, DROP COLUMN overrides,
    DROP COLUMN bypass_rules, DROP COLUMN template_id, DROP COLUMN lane;
DROP TYPE dispatch_lane;
ALTER TABLE batches DROP COLUMN overrides, DROP COLUMN error;
