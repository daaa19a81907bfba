-- +goose Up
-- The contact's own voice: opt-out and opt-in by keyword or quick-reply
-- button (inbound messages of the WhatsApp webhook), and by the provider's
-- refusal 131050 (the user stopped marketing messages).

-- A company's opt-out words. No row: the defaults (pkg/contacts). Keywords
-- are stored upper-cased and trimmed, as an inbound text is compared.
CREATE TABLE company_opt_out_settings (
    company_id        bigint      PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    opt_out_keywords  text[]      NOT NULL,
    opt_in_keywords   text[]      NOT NULL,
    -- quick-reply button payloads that opt out (a marketing template's
    -- "Stop promotions" button).
    opt_out_payloads  text[]      NOT NULL DEFAULT '{}',
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT company_opt_out_settings_disjoint CHECK (NOT (opt_out_keywords && opt_in_keywords))
);

-- Every consent change of a contact, and every repeated request: the
-- contact's state (contacts.opted_out_at) is the one of its latest entry by
-- occurred_at, so that webhooks that arrive out of order settle right.
CREATE TABLE contact_opt_out_events (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id          bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    contact_id          bigint      NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    opted_out           boolean     NOT NULL,
    -- keyword: an inbound text; button: a quick-reply payload; provider:
    -- a send refused with 131050; operator: parleyctl.
    reason              text        NOT NULL CHECK (reason IN ('keyword', 'button', 'provider', 'operator')),
    -- the text or payload that did it.
    keyword             text,
    -- the inbound message's wamid, or the refused outbound message's wamid.
    provider_message_id text,
    -- the refused outbound message.
    message_id          bigint      REFERENCES messages (id) ON DELETE SET NULL,
    occurred_at         timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX contact_opt_out_events_contact_idx ON contact_opt_out_events (contact_id, occurred_at DESC, id DESC);
-- A webhook delivered twice records its message once.
CREATE UNIQUE INDEX contact_opt_out_events_wamid_unique ON contact_opt_out_events (company_id, provider_message_id)
    WHERE provider_message_id IS NOT NULL;
CREATE UNIQUE INDEX contact_opt_out_events_message_unique ON contact_opt_out_events (message_id)
    WHERE message_id IS NOT NULL;

-- +goose Down
DROP TABLE contact_opt_out_events, company_opt_out_settings;
