-- +goose Up
-- Conversations (issue 22): what contacts send to a company's numbers, the
-- 24-hour customer service window of each contact and number, replies sent
-- through POST /api/messages, and the erasure of a contact (GDPR Art. 17).

-- A reply is a batch of one message (POST /api/messages).
ALTER TYPE batch_kind ADD VALUE IF NOT EXISTS 'reply';

ALTER TABLE messages
    -- a session message (text, media, interactive, reaction) in the Cloud
    -- API's wire format, for a reply that is not a template; NULL otherwise
    -- and once erased.
    ADD COLUMN content jsonb CHECK (content IS NULL OR jsonb_typeof(content) = 'object');

-- An erased contact's messages keep their batch, state, times and error
-- codes (the anonymous counts) with phone '' and nothing else that names the
-- person. NOT VALID: every existing row meets the stricter check it replaces,
-- and a large table is not scanned while the migration holds its lock.
ALTER TABLE messages DROP CONSTRAINT messages_phone_check,
    ADD CONSTRAINT messages_phone_check CHECK (phone ~ '^\+[1-9][0-9]{6,14}$' OR phone = '') NOT VALID;

ALTER TABLE contacts
    -- the WhatsApp profile name of the contact's last inbound message.
    ADD COLUMN profile_name text CHECK (length(profile_name) <= 256);

-- What contacts sent to a company's numbers, one row per inbound message.
-- Its id comes from the messages' sequence: a message has one id whichever
-- way it went, and GET /api/messages/{id} finds either.
CREATE TABLE inbound_messages (
    id                   bigint      PRIMARY KEY DEFAULT nextval('messages_id_seq'),
    company_id           bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- the business number it was sent to.
    messaging_account_id bigint      NOT NULL REFERENCES messaging_accounts (id) ON DELETE CASCADE,
    -- the sender (the company's contact of that phone), E.164 with '+'; ''
    -- once erased.
    phone                text        NOT NULL CHECK (phone ~ '^\+[1-9][0-9]{6,14}$' OR phone = ''),
    -- the Cloud API's wamid: Meta repeats webhooks, the second is ignored.
    -- NULL once erased (a wamid encodes the sender's number).
    wamid                text        UNIQUE,
    -- text, button, interactive, image, video, audio, document, sticker,
    -- location, contacts, reaction, unsupported.
    type                 text        NOT NULL CHECK (type ~ '^[a-z_]{1,32}$'),
    -- {"type": T, T: {...}}: whatsapp.InboundContent; NULL once erased.
    content              jsonb       CHECK (content IS NULL OR jsonb_typeof(content) = 'object'),
    -- the business message it answers, when it quotes one: its wamid, and
    -- Parley's message (and batch) when Parley sent it.
    context_wamid        text,
    context_message_id   bigint,
    context_batch_id     uuid,
    -- when the contact sent it (the webhook's timestamp), and when Parley
    -- recorded it.
    sent_at              timestamptz NOT NULL,
    received_at          timestamptz NOT NULL DEFAULT now(),
    erased_at            timestamptz
);
-- A conversation's messages, newest first (GET /api/contacts/{phone}/messages).
CREATE INDEX inbound_messages_phone_idx ON inbound_messages (company_id, phone, id);

-- The 24-hour customer service window of a contact and a business number:
-- open until last_inbound_at + 24 hours, opened or extended by each inbound
-- message (the time the contact sent it, as Meta computes it). One row per
-- conversation: the Conversations list reads them newest first (by the id
-- of their newest inbound message).
CREATE TABLE conversation_windows (
    messaging_account_id bigint      NOT NULL REFERENCES messaging_accounts (id) ON DELETE CASCADE,
    phone                text        NOT NULL CHECK (phone ~ '^\+[1-9][0-9]{6,14}$'),
    company_id           bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    last_inbound_at      timestamptz NOT NULL,
    -- the newest inbound message (by last_inbound_at).
    last_inbound_id      bigint      NOT NULL,
    PRIMARY KEY (messaging_account_id, phone)
);
CREATE INDEX conversation_windows_company_idx ON conversation_windows (company_id, last_inbound_id DESC);
CREATE INDEX conversation_windows_phone_idx ON conversation_windows (company_id, phone);

-- The conversations' routes (/api/contacts, /api/conversations,
-- /api/messages) join the names a connector cannot take (00004). NOT VALID:
-- a connector that already has one of them keeps it (and stays
-- unreachable, as it was behind GET /api/messages).
ALTER TABLE connectors DROP CONSTRAINT connectors_name_not_reserved,
    ADD CONSTRAINT connectors_name_not_reserved CHECK (name NOT IN ('automations', 'batch', 'batches', 'campaigns',
        'contacts', 'conversations', 'docs', 'messages', 'segments')) NOT VALID;

-- +goose Down
ALTER TABLE connectors DROP CONSTRAINT connectors_name_not_reserved,
    ADD CONSTRAINT connectors_name_not_reserved CHECK (name NOT IN ('automations', 'batch', 'batches', 'campaigns', 'docs', 'segments')) NOT VALID;
DROP TABLE conversation_windows, inbound_messages;
ALTER TABLE contacts DROP COLUMN profile_name;
DELETE FROM messages WHERE phone = '';
ALTER TABLE messages DROP CONSTRAINT messages_phone_check,
    ADD CONSTRAINT messages_phone_check CHECK (phone ~ '^\+[1-9][0-9]{6,14}$');
ALTER TABLE messages DROP COLUMN content;
-- batch_kind keeps 'reply': enum values cannot be dropped.
