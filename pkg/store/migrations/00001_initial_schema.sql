-- +goose Up
-- The system of record. Every table that belongs to a company carries
-- company_id so that every query can be scoped to the caller's company.

CREATE TABLE companies (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- slug is the operator-facing handle; seed and scripts find a company by it.
    slug                text        NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name                text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    subscription_active boolean     NOT NULL DEFAULT false,
    -- a workspace that is not provisioned yet answers 403 even with a valid key.
    provisioned         boolean     NOT NULL DEFAULT false,
    max_segments        integer     NOT NULL DEFAULT 100 CHECK (max_segments >= 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TYPE user_role AS ENUM ('admin', 'member');

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id    bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    email         text        NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
    -- PHC string: $argon2id$v=19$m=...,t=...,p=...$salt$hash
    password_hash text        NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    role          user_role   NOT NULL DEFAULT 'member',
    created_at    timestamptz NOT NULL DEFAULT now()
);
-- Users sign in by email alone, so an address belongs to one user.
CREATE UNIQUE INDEX users_email_unique ON users (lower(email));
CREATE INDEX users_company_idx ON users (company_id);

-- active: the company's one working key. rotated: replaced, still accepted
-- until grace_ends_at. revoked: refused, for good.
CREATE TYPE api_key_state AS ENUM ('active', 'rotated', 'revoked');

CREATE TABLE api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id   bigint        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- the public part of service_<key_id>_<secret>; looked up on every request.
    key_id       text          NOT NULL UNIQUE,
    -- SHA-256 of the secret. The secret carries >= 128 random bits, so a
    -- fast hash is enough; the plain secret is never stored.
    secret_hash  bytea         NOT NULL CHECK (length(secret_hash) = 32),
    -- the last characters of the secret, for the masked display only.
    secret_hint  text          NOT NULL,
    state        api_key_state NOT NULL DEFAULT 'active',
    created_at   timestamptz   NOT NULL DEFAULT now(),
    created_by   bigint        REFERENCES users (id) ON DELETE SET NULL,
    last_used_at timestamptz,
    rotated_at   timestamptz,
    grace_ends_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT api_keys_rotation_has_grace CHECK ((state = 'rotated') = (grace_ends_at IS NOT NULL AND revoked_at IS NULL)),
    CONSTRAINT api_keys_revoked_has_time CHECK ((state = 'revoked') = (revoked_at IS NOT NULL))
);
-- The spec's "one active key per company", kept by the database itself.
CREATE UNIQUE INDEX api_keys_one_active_per_company ON api_keys (company_id) WHERE state = 'active';
CREATE INDEX api_keys_company_idx ON api_keys (company_id, created_at DESC);

CREATE TYPE api_key_action AS ENUM ('create', 'rotate', 'revoke');

-- The audit trail of key actions shown on the Credentials page.
CREATE TABLE api_key_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id bigint         NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    api_key_id bigint         NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    action     api_key_action NOT NULL,
    -- the signed-in user, or NULL when an operator acted through parleyctl or the admin API.
    actor_user_id bigint      REFERENCES users (id) ON DELETE SET NULL,
    actor      text           NOT NULL,
    created_at timestamptz    NOT NULL DEFAULT now()
);
CREATE INDEX api_key_events_company_idx ON api_key_events (company_id, created_at DESC);

-- A WhatsApp Business phone number connected to a company.
CREATE TABLE messaging_accounts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id       bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name             text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    -- the Cloud API's phone number id: POST /{version}/{phone_number_id}/messages
    phone_number_id  text        NOT NULL UNIQUE CHECK (phone_number_id ~ '^[0-9]{1,32}$'),
    -- AES-256-GCM (nonce || ciphertext) of the Bearer token; see pkg/secretbox.
    access_token_encrypted bytea NOT NULL,
    connected        boolean     NOT NULL DEFAULT true,
    -- IANA zone in which the delivery-hours window is read.
    timezone         text        NOT NULL DEFAULT 'UTC',
    -- local wall-clock window in which non-forced campaign messages may go out.
    -- Both NULL: no restriction. start > end: the window wraps midnight.
    delivery_window_start time,
    delivery_window_end   time,
    -- the provider's throughput for this number, shared by all dispatchers.
    throughput_per_second integer NOT NULL DEFAULT 80 CHECK (throughput_per_second > 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT messaging_accounts_window_both_or_neither CHECK ((delivery_window_start IS NULL) = (delivery_window_end IS NULL)),
    CONSTRAINT messaging_accounts_window_not_empty CHECK (delivery_window_start IS DISTINCT FROM delivery_window_end OR delivery_window_start IS NULL)
);
CREATE INDEX messaging_accounts_company_idx ON messaging_accounts (company_id);

CREATE TYPE template_header_kind AS ENUM ('none', 'text', 'image', 'video');

-- A WhatsApp message template as approved on the provider, with how its
-- parameters are filled for one contact.
CREATE TABLE templates (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id  bigint               NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- the provider's template name and language code (template.name, template.language.code).
    name        text                 NOT NULL CHECK (name ~ '^[a-z0-9_]{1,512}$'),
    language    text                 NOT NULL DEFAULT 'en_US',
    header_kind template_header_kind NOT NULL DEFAULT 'none',
    header_text text,
    -- used when neither the request nor the contact supplies image_url/video_url.
    header_media_url text,
    -- ordered bindings of the body's {{1}}, {{2}}, ...: a JSON array of
    -- {"source":"first_name"} | {"source":"last_name"} | {"source":"phone"}
    -- | {"source":"variable","name":"<trigger variable>"} | {"source":"literal","value":"..."}
    -- each optionally with "default" for when the value is missing.
    body_parameters jsonb            NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(body_parameters) = 'array'),
    -- URL buttons whose URL ends in a dynamic {{1}}: the fixed base and the
    -- suffix sent when the request gives no url/url2.
    url_button_1_base           text,
    url_button_1_default_suffix text,
    url_button_2_base           text,
    url_button_2_default_suffix text,
    created_at  timestamptz          NOT NULL DEFAULT now(),
    CONSTRAINT templates_button_2_needs_button_1 CHECK (url_button_2_base IS NULL OR url_button_1_base IS NOT NULL),
    CONSTRAINT templates_media_header_only CHECK (header_media_url IS NULL OR header_kind IN ('image', 'video')),
    UNIQUE (company_id, name, language)
);

CREATE TABLE campaigns (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id           bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name                 text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    template_id          bigint      NOT NULL REFERENCES templates (id),
    messaging_account_id bigint      NOT NULL REFERENCES messaging_accounts (id),
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaigns_company_idx ON campaigns (company_id);

CREATE TYPE automation_type AS ENUM ('api', 'event', 'scheduled');

CREATE TABLE automations (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id           bigint          NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name                 text            NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    type                 automation_type NOT NULL DEFAULT 'api',
    active               boolean         NOT NULL DEFAULT false,
    -- both optional: a misconfigured automation exists and is refused with 422.
    template_id          bigint          REFERENCES templates (id),
    messaging_account_id bigint          REFERENCES messaging_accounts (id),
    -- variables every triggered contact must supply (the scenario's trigger variables).
    trigger_variables    text[]          NOT NULL DEFAULT '{}',
    created_at           timestamptz     NOT NULL DEFAULT now()
);
CREATE INDEX automations_company_idx ON automations (company_id);

CREATE TABLE contacts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id   bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- normalised E.164 with the leading '+'.
    phone        text        NOT NULL CHECK (phone ~ '^\+[1-9][0-9]{6,14}$'),
    first_name   text        CHECK (length(first_name) <= 255),
    last_name    text        CHECK (length(last_name) <= 255),
    -- saved trigger variables, for personalisation: {"name": "value"}.
    variables    jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(variables) = 'object'),
    opted_out_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, phone)
);

CREATE TABLE segments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, name)
);

CREATE TABLE segment_members (
    segment_id bigint      NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    contact_id bigint      NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    added_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (segment_id, contact_id)
);
CREATE INDEX segment_members_contact_idx ON segment_members (contact_id);

-- A third-party integration (shopify, ...). A send through it triggers its
-- target automation, or sends its target campaign.
CREATE TABLE connectors (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id           bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name                 text        NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    connected            boolean     NOT NULL DEFAULT false,
    target_automation_id bigint      REFERENCES automations (id),
    target_campaign_id   bigint      REFERENCES campaigns (id),
    created_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT connectors_one_target CHECK (num_nonnulls(target_automation_id, target_campaign_id) <= 1),
    UNIQUE (company_id, name)
);

CREATE TYPE batch_kind AS ENUM ('campaign', 'automation', 'batch', 'connector');

-- accepted: in the stream, not yet expanded. scheduled: held until scheduled_at.
-- processing: messages exist and some are not final. completed: every
-- message reached a terminal state (sent, delivered, read, failed, skipped_opt_out).
CREATE TYPE batch_status AS ENUM ('accepted', 'scheduled', 'processing', 'completed');

CREATE TABLE batches (
    -- UUIDv7: unique and time-sortable; the Nats-Msg-Id of the publish.
    id              uuid         PRIMARY KEY,
    company_id      bigint       NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    kind            batch_kind   NOT NULL,
    -- what asked for it: the endpoint, and for connectors the connector's name.
    source          text         NOT NULL,
    campaign_id     bigint       REFERENCES campaigns (id),
    automation_id   bigint       REFERENCES automations (id),
    segment_id      bigint       REFERENCES segments (id),
    contact_count   integer      NOT NULL CHECK (contact_count >= 0),
    is_forced       boolean      NOT NULL DEFAULT false,
    scheduled_at    timestamptz,
    status          batch_status NOT NULL DEFAULT 'accepted',
    idempotency_key text,
    accepted_at     timestamptz  NOT NULL,
    created_at      timestamptz  NOT NULL DEFAULT now(),
    completed_at    timestamptz
);
CREATE INDEX batches_company_idx ON batches (company_id, id DESC);
CREATE INDEX batches_due_idx ON batches (scheduled_at) WHERE status = 'scheduled';

-- queued -> (scheduled | deferred) -> sending -> sent -> delivered -> read,
-- or failed / skipped_opt_out. 'sending' is written before the provider call
-- so that a redelivered message is never sent twice once recorded as sent.
CREATE TYPE message_state AS ENUM (
    'queued', 'scheduled', 'deferred', 'sending', 'sent', 'delivered', 'read', 'failed', 'skipped_opt_out'
);

CREATE TABLE messages (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id            uuid          NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    -- position of the contact in the batch; (batch_id, seq) makes redelivery idempotent.
    seq                 integer       NOT NULL CHECK (seq >= 0),
    company_id          bigint        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    contact_id          bigint        REFERENCES contacts (id) ON DELETE SET NULL,
    phone               text          NOT NULL CHECK (phone ~ '^\+[1-9][0-9]{6,14}$'),
    messaging_account_id bigint       REFERENCES messaging_accounts (id),
    state               message_state NOT NULL DEFAULT 'queued',
    -- the provider's wamid, known once sent; status callbacks find the row by it.
    provider_message_id text          UNIQUE,
    -- the provider's error code and title when failed (131026, 131047, ...).
    error_code          integer,
    error_title         text,
    attempts            integer       NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- earliest time to send: scheduled_at, or the next delivery-hours opening.
    not_before          timestamptz,
    created_at          timestamptz   NOT NULL DEFAULT now(),
    updated_at          timestamptz   NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    delivered_at        timestamptz,
    read_at             timestamptz,
    failed_at           timestamptz,
    UNIQUE (batch_id, seq)
);
CREATE INDEX messages_batch_state_idx ON messages (batch_id, state);
CREATE INDEX messages_waiting_idx ON messages (not_before) WHERE state IN ('scheduled', 'deferred');

-- +goose Down
DROP TABLE messages, batches, connectors, segment_members, segments, contacts, automations,
    campaigns, templates, messaging_accounts, api_key_events, api_keys, users, companies;
DROP TYPE message_state, batch_status, batch_kind, automation_type, template_header_kind,
    api_key_action, api_key_state, user_role;
