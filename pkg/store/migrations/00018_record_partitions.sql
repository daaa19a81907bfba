-- +goose Up
-- A record with a lifetime (issue 25): messages and inbound_messages are
-- partitioned by week (PostgreSQL's declarative range partitioning), so
-- that a retention (PARLEY_MESSAGES_RETENTION) removes whole weeks by
-- dropping their partitions, never row by row. pkg/store's partition
-- functions create the weeks ahead and drop the expired ones; the services
-- call them (pkg/record's Lifetime, pkg/webhooks' for its own tables).
--
-- The partition key of a message is created_at, which every insertion sets
-- to its batch's accepted_at: one batch's messages share one week, and a
-- batch expanded twice (a redelivery) gives the same (batch_id, seq,
-- created_at), so the unique key that makes an expansion idempotent keeps
-- doing so with the partition key in it (PostgreSQL requires it in every
-- unique index of a partitioned table). An inbound message's key is
-- sent_at, the webhook's own timestamp: a repeated webhook has the same.
--
-- The rows that exist become one partition, messages_legacy (everything
-- before this week's Monday, or before the Monday after the newest row when
-- there are rows this week or later: ATTACH refuses a row beyond the bound,
-- and the weeks after it are partitions of their own); it is dropped like any other once its week has passed
-- the retention and nothing in it is still open. On a large table the
-- migration builds the new indexes on it while it holds its lock.

-- parley_weekly_partitions creates the weekly partitions of parent (a
-- table partitioned by range of one timestamptz column) from the week of
-- first (weeks start on Monday, 00:00 UTC) for the weeks after it, named
-- <parent>_wYYYYMMDD, and returns the names of those it created. A week
-- that another partition (messages_legacy) already covers in part is left
-- alone. Serialised per parent by an advisory lock of the transaction.
-- +goose StatementBegin
CREATE FUNCTION parley_weekly_partitions(parent text, first timestamptz, weeks integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    w timestamptz := date_trunc('week', first, 'UTC');
    name text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('parley_weekly_partitions ' || parent));
    FOR i IN 0..weeks LOOP
        name := parent || '_w' || to_char(w AT TIME ZONE 'UTC', 'YYYYMMDD');
        IF to_regclass(quote_ident(name)) IS NULL AND NOT EXISTS (
            SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass(quote_ident(parent)) AND c.relname = parent || '_legacy'
                AND w < (SELECT parley_partition_end(c.oid))) THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', name, parent,
                to_char(w AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                to_char((w + interval '168 hours') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
            RETURN NEXT name;
        END IF;
        w := w + interval '168 hours';
    END LOOP;
END $$;
-- +goose StatementEnd

-- parley_partition_end is the upper bound of a range partition (its rows
-- are before it); NULL for a default partition or one that ends at MAXVALUE.
-- +goose StatementBegin
CREATE FUNCTION parley_partition_end(part oid) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT (regexp_match(pg_get_expr(relpartbound, oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
    FROM pg_class WHERE oid = part
$$;
-- +goose StatementEnd

-- The messages' ids keep their sequence and its name (inbound messages and
-- replies take ids from it): an identity column cannot be partitioned in
-- PostgreSQL 15, so the identity becomes a plain sequence default.
CREATE SEQUENCE message_ids AS bigint;
SELECT setval('message_ids', last_value, is_called) FROM messages_id_seq;
ALTER TABLE inbound_messages ALTER COLUMN id SET DEFAULT nextval('message_ids');
ALTER TABLE messages ALTER COLUMN id DROP IDENTITY;
ALTER SEQUENCE message_ids RENAME TO messages_id_seq;

-- A foreign key can only name a whole unique key of a partitioned table,
-- (id, created_at) here: the opt-out event keeps the refused message's id,
-- without the check.
ALTER TABLE contact_opt_out_events DROP CONSTRAINT contact_opt_out_events_message_id_fkey;

-- messages
ALTER TABLE messages RENAME TO messages_legacy;
ALTER TABLE messages_legacy VALIDATE CONSTRAINT messages_phone_check;
ALTER TABLE messages_legacy DROP CONSTRAINT messages_pkey, DROP CONSTRAINT messages_batch_id_seq_key,
    DROP CONSTRAINT messages_batch_id_fkey, DROP CONSTRAINT messages_contact_id_fkey;
DROP INDEX messages_batch_state_idx, messages_claimed_idx, messages_due_idx, messages_held_idx, messages_phone_idx,
    messages_provider_message_id_unique;

CREATE TABLE messages (LIKE messages_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
ALTER TABLE messages ALTER COLUMN id SET DEFAULT nextval('messages_id_seq');
ALTER SEQUENCE messages_id_seq OWNED BY messages.id;
ALTER TABLE messages ADD PRIMARY KEY (id, created_at),
    ADD CONSTRAINT messages_batch_seq_key UNIQUE (batch_id, seq, created_at),
    ADD CONSTRAINT messages_batch_id_fkey FOREIGN KEY (batch_id) REFERENCES batches (id) ON DELETE CASCADE,
    ADD CONSTRAINT messages_contact_id_fkey FOREIGN KEY (contact_id) REFERENCES contacts (id) ON DELETE SET NULL;
CREATE INDEX messages_batch_state_idx ON messages (batch_id, state);
CREATE INDEX messages_claimed_idx ON messages (claimed_at) WHERE state = 'sending';
CREATE INDEX messages_due_idx ON messages (lane, messaging_account_id, not_before, id)
    WHERE state IN ('queued', 'scheduled', 'deferred');
CREATE INDEX messages_held_idx ON messages (template_id, not_before) WHERE state = 'held';
CREATE INDEX messages_phone_idx ON messages (company_id, phone, id);
-- Unique per partition only (a unique index of a partitioned table must
-- hold its partition key); the provider makes wamids unique.
CREATE INDEX messages_provider_message_id_idx ON messages (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- +goose StatementBegin
DO $$ BEGIN
    EXECUTE format('ALTER TABLE messages ATTACH PARTITION messages_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
        to_char(greatest(date_trunc('week', now(), 'UTC'),
            (SELECT date_trunc('week', max(created_at), 'UTC') + interval '168 hours' FROM messages_legacy))
            AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END $$;
-- +goose StatementEnd
-- Rows whose week has no partition (one dropped by the retention, or not
-- created yet): an insertion never fails for want of one. Empty while the
-- services create the weeks ahead.
CREATE TABLE messages_default PARTITION OF messages DEFAULT;
SELECT parley_weekly_partitions('messages', now(), 2);

-- inbound_messages
ALTER TABLE inbound_messages RENAME TO inbound_messages_legacy;
ALTER TABLE inbound_messages_legacy DROP CONSTRAINT inbound_messages_pkey, DROP CONSTRAINT inbound_messages_wamid_key,
    DROP CONSTRAINT inbound_messages_company_id_fkey, DROP CONSTRAINT inbound_messages_messaging_account_id_fkey;
DROP INDEX inbound_messages_phone_idx;
CREATE TABLE inbound_messages (LIKE inbound_messages_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (sent_at);
ALTER TABLE inbound_messages ADD PRIMARY KEY (id, sent_at),
    ADD CONSTRAINT inbound_messages_wamid_key UNIQUE (wamid, sent_at),
    ADD CONSTRAINT inbound_messages_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies (id) ON DELETE CASCADE,
    ADD CONSTRAINT inbound_messages_messaging_account_id_fkey FOREIGN KEY (messaging_account_id)
        REFERENCES messaging_accounts (id) ON DELETE CASCADE;
CREATE INDEX inbound_messages_phone_idx ON inbound_messages (company_id, phone, id);
-- +goose StatementBegin
DO $$ BEGIN
    EXECUTE format('ALTER TABLE inbound_messages ATTACH PARTITION inbound_messages_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
        to_char(greatest(date_trunc('week', now(), 'UTC'),
            (SELECT date_trunc('week', max(sent_at), 'UTC') + interval '168 hours' FROM inbound_messages_legacy))
            AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END $$;
-- +goose StatementEnd
CREATE TABLE inbound_messages_default PARTITION OF inbound_messages DEFAULT;
SELECT parley_weekly_partitions('inbound_messages', now(), 2);

-- +goose Down
-- Not reversible in place: the partitions would have to be merged back
-- into one table. Restore a backup taken before the upgrade instead.
SELECT 1 / 0 AS irreversible_migration_00018;
