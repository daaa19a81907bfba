-- +goose Up
-- A record with a lifetime (issue 25), for webhooks: webhook_deliveries and
-- webhook_attempts are partitioned by week like messages (00018), so that
-- PARLEY_WEBHOOKS_ATTEMPT_RETENTION removes whole weeks by dropping their
-- partitions, never row by row. The webhook sender creates the weeks ahead
-- and drops the expired ones (pkg/webhooks' KeepDeliveries), keeping a week
-- while one of its deliveries is still pending.
--
-- The partition key of a delivery is created_at, which the fan-out sets to
-- its event's time (webhooks.EventTime): the time in the event's id, a
-- UUIDv7 that events.Append mints when the change commits (occurred_at for
-- an id of another version). An event fanned out again (a redelivery) has
-- the same id, so the same created_at, and the unique key that makes the
-- fan-out idempotent, (endpoint_id, event_id, created_at) now, keeps doing
-- so. Not occurred_at itself: it may be the provider's clock (a status
-- days late, or ahead), and a row of a week without its partition goes to
-- the default partition, which never expires and stops that week from
-- being created. The id's time is Parley's own clock at the commit. A test
-- event (webhooks.SendTest, inserted once) is filed under when it is sent.
--
-- An attempt carries its delivery's key (delivery_created_at, a new column:
-- an attempt may be made weeks after its delivery was created, and must go
-- with it) and is partitioned by it: a week's attempts are dropped with
-- its deliveries (store.Expiring.With), and a pending delivery keeps its
-- attempts with it.
--
-- The rows that exist become one partition of each table, <table>_legacy,
-- up to the week after the newest delivery (so that the rows of this week
-- fit it; the weeks after it are created as usual). On a large table the
-- migration rewrites webhook_attempts (its new column) and builds the new
-- indexes while it holds its locks; the retention has kept both tables to
-- about a month.

-- The ids keep their sequences (their names too): an identity column
-- cannot be partitioned in PostgreSQL 15, so each becomes a plain sequence
-- default, as 00018 did for messages.
CREATE SEQUENCE webhook_delivery_ids AS bigint;
SELECT setval('webhook_delivery_ids', last_value, is_called) FROM webhook_deliveries_id_seq;
ALTER TABLE webhook_deliveries ALTER COLUMN id DROP IDENTITY;
ALTER SEQUENCE webhook_delivery_ids RENAME TO webhook_deliveries_id_seq;
CREATE SEQUENCE webhook_attempt_ids AS bigint;
SELECT setval('webhook_attempt_ids', last_value, is_called) FROM webhook_attempts_id_seq;
ALTER TABLE webhook_attempts ALTER COLUMN id DROP IDENTITY;
ALTER SEQUENCE webhook_attempt_ids RENAME TO webhook_attempts_id_seq;

-- No foreign key from attempts to deliveries: PostgreSQL refuses to drop a
-- partition of a table that a foreign key references (the constraint
-- depends on it). The sender inserts an attempt only beside its delivery,
-- a drop takes a week's attempts with its deliveries, and an erasure
-- deletes both (webhooks.ErasePhone); an endpoint's deletion still
-- cascades to both.
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
ALTER TABLE webhook_attempts ADD COLUMN delivery_created_at timestamptz;
UPDATE webhook_attempts a SET delivery_created_at = d.created_at FROM webhook_deliveries d WHERE d.id = a.delivery_id;
ALTER TABLE webhook_attempts ALTER COLUMN delivery_created_at SET NOT NULL;

-- webhook_deliveries
ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_legacy;
ALTER TABLE webhook_deliveries_legacy DROP CONSTRAINT webhook_deliveries_pkey,
    DROP CONSTRAINT webhook_deliveries_endpoint_id_event_id_key,
    DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey, DROP CONSTRAINT webhook_deliveries_company_id_fkey;
-- created_idx served the DELETE of the old retention; the weeks' ranges
-- take its place.
DROP INDEX webhook_deliveries_due_idx, webhook_deliveries_endpoint_idx, webhook_deliveries_created_idx;
CREATE TABLE webhook_deliveries (LIKE webhook_deliveries_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
ALTER TABLE webhook_deliveries ALTER COLUMN id SET DEFAULT nextval('webhook_deliveries_id_seq');
ALTER SEQUENCE webhook_deliveries_id_seq OWNED BY webhook_deliveries.id;
ALTER TABLE webhook_deliveries ADD PRIMARY KEY (id, created_at),
    ADD CONSTRAINT webhook_deliveries_endpoint_event_key UNIQUE (endpoint_id, event_id, created_at),
    ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id)
        REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    ADD CONSTRAINT webhook_deliveries_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies (id) ON DELETE CASCADE;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, status, created_at);

-- webhook_attempts
ALTER TABLE webhook_attempts RENAME TO webhook_attempts_legacy;
ALTER TABLE webhook_attempts_legacy DROP CONSTRAINT webhook_attempts_pkey, DROP CONSTRAINT webhook_attempts_endpoint_id_fkey;
-- attempted_idx served the DELETE of the old retention only.
DROP INDEX webhook_attempts_endpoint_idx, webhook_attempts_attempted_idx;
CREATE TABLE webhook_attempts (LIKE webhook_attempts_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (delivery_created_at);
ALTER TABLE webhook_attempts ALTER COLUMN id SET DEFAULT nextval('webhook_attempts_id_seq');
ALTER SEQUENCE webhook_attempts_id_seq OWNED BY webhook_attempts.id;
ALTER TABLE webhook_attempts ADD PRIMARY KEY (id, delivery_created_at),
    ADD CONSTRAINT webhook_attempts_endpoint_id_fkey FOREIGN KEY (endpoint_id)
        REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, id DESC);

-- The legacy partitions end together (a drop pairs them by name): at the
-- Monday after the newest delivery, or at this week's Monday when there is
-- none this week, so that every row fits (ATTACH refuses a row beyond the
-- bound) and the weeks after it are partitions of their own.
-- +goose StatementBegin
DO $$
DECLARE
    legacy_end text := to_char(greatest(date_trunc('week', now(), 'UTC'),
        (SELECT date_trunc('week', max(created_at), 'UTC') + interval '168 hours' FROM webhook_deliveries_legacy))
        AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
BEGIN
    EXECUTE format('ALTER TABLE webhook_deliveries ATTACH PARTITION webhook_deliveries_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
        legacy_end);
    EXECUTE format('ALTER TABLE webhook_attempts ATTACH PARTITION webhook_attempts_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
        legacy_end);
END $$;
-- +goose StatementEnd
-- Rows whose week has no partition (one dropped by the retention, or not
-- created yet): an insertion never fails for want of one. Empty while the
-- sender creates the weeks ahead.
CREATE TABLE webhook_deliveries_default PARTITION OF webhook_deliveries DEFAULT;
CREATE TABLE webhook_attempts_default PARTITION OF webhook_attempts DEFAULT;
SELECT parley_weekly_partitions('webhook_deliveries', now(), 2);
SELECT parley_weekly_partitions('webhook_attempts', now(), 2);

-- +goose Down
-- Not reversible in place: the partitions would have to be merged back
-- into one table. Restore a backup taken before the upgrade instead.
SELECT 1 / 0 AS irreversible_migration_00019;
