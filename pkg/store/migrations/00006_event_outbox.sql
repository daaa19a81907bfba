-- +goose Up
-- The transactional outbox of events (pkg/events): every committed change
-- that a company may hear about (a message sent, delivered, read, failed or
-- skipped; a batch completed, failed or cancelled; a contact opted out or
-- in) inserts its event here in the same transaction as the change, so an
-- event exists exactly when its change does. A relay moves rows to the
-- EVENTS stream and deletes them; nothing else reads this table.
CREATE TABLE event_outbox (
    -- the event's id, the webhook-id its deliveries carry (UUIDv7 from Go).
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- relay order: oldest first.
    seq         bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    company_id  bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    type        text        NOT NULL CHECK (type ~ '^[a-z_]+\.[a-z_]+$'),
    -- when the change happened (the record's own time, not the insert's).
    occurred_at timestamptz NOT NULL,
    data        jsonb       NOT NULL CHECK (jsonb_typeof(data) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE event_outbox;
