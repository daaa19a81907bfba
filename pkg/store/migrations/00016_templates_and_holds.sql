-- +goose Up
-- WhatsApp as strict as it is (issue 23): templates with their lifecycle at
-- the provider, messages held (never burnt) while their template cannot be
-- sent or the portfolio's messaging limit is reached, and each number's
-- quality and messaging limit tier.

-- held: waiting for something outside Parley (a template's review or the
-- end of its pause, room under the messaging limit), with hold_reason. Not
-- terminal: it goes back to queued when that changes, fails when the
-- template is disabled or rejected, and is cancelled with its batch.
ALTER TYPE message_state ADD VALUE IF NOT EXISTS 'held';

ALTER TABLE messages
    -- why a held message waits: template_pending, template_paused,
    -- messaging_limit. Kept after it is released (the message list says
    -- what it waited for). Not indexed: the update stays HOT.
    ADD COLUMN hold_reason text CHECK (length(hold_reason) <= 64),
    -- when the message was last held.
    ADD COLUMN held_at     timestamptz,
    -- when the provider's 131049 (the user's marketing message limit) held
    -- it for its one retry; a second 131049 fails it.
    ADD COLUMN marketing_retry_at timestamptz;

-- Templates as the provider knows them. A template registered by hand (the
-- catalog's way until now, no provider id) is APPROVED; one created through
-- Parley is submitted to the provider and starts PENDING.
ALTER TABLE templates
    ADD COLUMN status        text NOT NULL DEFAULT 'APPROVED'
        CHECK (status IN ('PENDING', 'APPROVED', 'REJECTED', 'PAUSED', 'DISABLED')),
    ADD COLUMN category      text NOT NULL DEFAULT 'MARKETING'
        CHECK (category IN ('MARKETING', 'UTILITY', 'AUTHENTICATION')),
    ADD COLUMN quality       text NOT NULL DEFAULT 'UNKNOWN'
        CHECK (quality IN ('UNKNOWN', 'GREEN', 'YELLOW', 'RED')),
    -- a REJECTED template's reason (INVALID_FORMAT, ...), or a pause's or
    -- disabling's explanation.
    ADD COLUMN status_reason text CHECK (length(status_reason) <= 1024),
    -- the provider's template id (message_templates' id) once submitted.
    ADD COLUMN provider_template_id text CHECK (length(provider_template_id) <= 64),
    -- the messaging account whose WhatsApp Business Account it was submitted
    -- to (the provider's templates are per WABA).
    ADD COLUMN messaging_account_id bigint REFERENCES messaging_accounts (id) ON DELETE SET NULL,
    -- the definition submitted (TemplateDefinition's components), as sent.
    ADD COLUMN definition    jsonb,
    ADD COLUMN pause_count   integer NOT NULL DEFAULT 0 CHECK (pause_count >= 0),
    -- when a PAUSED template is expected back (the provider's pause length).
    ADD COLUMN paused_until  timestamptz,
    ADD COLUMN status_changed_at timestamptz NOT NULL DEFAULT now();

-- Every status change of a template, oldest first: its pause history.
CREATE TABLE template_status_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    template_id bigint      NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    company_id  bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    status      text        NOT NULL,
    previous_status text    NOT NULL,
    reason      text,
    -- webhook (the provider's message_template_status_update), sync (the
    -- periodic full sync), send (the provider refused a send with 132015 or
    -- 132016), submit (created through Parley), operator.
    source      text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX template_status_events_template_idx ON template_status_events (template_id, id);

-- Each number's WhatsApp Business Account and business portfolio, its
-- quality rating and its messaging limit tier (phone_number_quality_update,
-- or set by the operator).
ALTER TABLE messaging_accounts
    -- empty: the phone number id (each number its own account)
    ADD COLUMN waba_id      text CHECK (waba_id ~ '^[0-9]{1,32}$'),
    -- empty: the WABA id (each account its own portfolio)
    ADD COLUMN portfolio_id text CHECK (portfolio_id ~ '^[0-9]{1,32}$'),
    ADD COLUMN quality_rating text NOT NULL DEFAULT 'UNKNOWN'
        CHECK (quality_rating IN ('UNKNOWN', 'GREEN', 'YELLOW', 'RED')),
    ADD COLUMN quality_updated_at timestamptz;
CREATE INDEX messaging_accounts_waba_idx ON messaging_accounts (waba_id) WHERE waba_id IS NOT NULL;

-- The messaging limit of each business portfolio a company's numbers are
-- in: the unique users it may reach outside an open customer service window
-- in a moving 24 hours. No row: unlimited (TIER_UNLIMITED) until told.
CREATE TABLE portfolios (
    company_id   bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    portfolio_id text        NOT NULL CHECK (portfolio_id ~ '^[0-9]{1,32}$'),
    tier         text        NOT NULL
        CHECK (tier IN ('TIER_250', 'TIER_2K', 'TIER_10K', 'TIER_100K', 'TIER_UNLIMITED')),
    -- provider (phone_number_quality_update) or operator
    source       text        NOT NULL CHECK (source IN ('provider', 'operator')),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, portfolio_id)
);

-- +goose Down
DROP TABLE portfolios, template_status_events;
ALTER TABLE messaging_accounts DROP COLUMN waba_id, DROP COLUMN portfolio_id, DROP COLUMN quality_rating,
    DROP COLUMN quality_updated_at;
ALTER TABLE templates DROP COLUMN status, DROP COLUMN category, DROP COLUMN quality, DROP COLUMN status_reason,
    DROP COLUMN provider_template_id, DROP COLUMN messaging_account_id, DROP COLUMN definition, DROP COLUMN pause_count,
    DROP COLUMN paused_until, DROP COLUMN status_changed_at;
-- An enum value cannot be dropped: held messages go back to queued.
UPDATE messages SET state = 'queued' WHERE state::text = 'held';
ALTER TABLE messages DROP COLUMN hold_reason, DROP COLUMN held_at, DROP COLUMN marketing_retry_at;
