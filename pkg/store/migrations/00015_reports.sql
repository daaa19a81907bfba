-- +goose Up
-- Reports (issue 24): what each message cost, whether its contact replied,
-- and counters by hour that a report reads instead of counting messages.

ALTER TABLE messages
    -- how the Cloud API billed the message, from the pricing object of its
    -- status callbacks (per-message pricing since July 2025): billable,
    -- category (marketing, utility, authentication, service, ...) and
    -- pricing model (PMP). NULL until a callback carried it.
    ADD COLUMN billable         boolean,
    ADD COLUMN pricing_category text CHECK (length(pricing_category) <= 64),
    ADD COLUMN pricing_model    text CHECK (length(pricing_model) <= 64),
    -- when the contact first answered it: an inbound message quoting it, or
    -- the contact's next message to the same number within 24 hours.
    ADD COLUMN replied_at       timestamptz,
    -- the state a status callback moved the message from: PostgreSQL 15's
    -- RETURNING shows only new values, and the callback's counters must
    -- know what it changed (a read that comes without its delivered, a
    -- delivery after a failure); NULL when a callback only priced it. Only
    -- that statement reads it. Not indexed: the update stays HOT.
    ADD COLUMN prior_state      message_state;

-- A status callback that names a wamid not recorded yet keeps its pricing too.
ALTER TABLE provider_status_backlog
    ADD COLUMN billable         boolean,
    ADD COLUMN pricing_category text,
    ADD COLUMN pricing_model    text;

-- The counters of every change of a message, by the hour it happened, in
-- UTC, and by what the message was sent for: a campaign, an automation, or
-- (subject_id 0) a reply or a batch without either. A transaction that
-- changes messages appends its counts here (one row per batch, hour and
-- metric it touched), so that concurrent writers never wait on one
-- counter row; pkg/record's FoldReports moves them into report_hours.
CREATE TABLE report_deltas (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id   bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    subject_kind text        NOT NULL,
    subject_id   bigint      NOT NULL,
    hour         timestamptz NOT NULL,
    -- accepted, sent, delivered, read, replied, failed, skipped_opt_out,
    -- cancelled, billable, and left (a message that can no longer be sent:
    -- sent, failed before or at its send, skipped or cancelled).
    metric       text        NOT NULL,
    -- failed: the error code (0 when Parley failed it without one).
    code         integer     NOT NULL DEFAULT 0,
    -- failed: the error's title; billable: the pricing category; else ''.
    label        text        NOT NULL DEFAULT '',
    n            integer     NOT NULL
);

-- The folded counters: one row per company, subject, hour, metric, code and
-- label. A report sums these and the few deltas not folded yet.
CREATE TABLE report_hours (
    company_id   bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    subject_kind text        NOT NULL,
    subject_id   bigint      NOT NULL,
    hour         timestamptz NOT NULL,
    metric       text        NOT NULL,
    code         integer     NOT NULL DEFAULT 0,
    label        text        NOT NULL DEFAULT '',
    n            bigint      NOT NULL,
    PRIMARY KEY (company_id, subject_kind, subject_id, hour, metric, code, label)
);

-- parley_report_counts(company) is every counter of a company's messages
-- computed from the messages themselves: what the deltas add up to when
-- every change was counted. The migration fills report_hours with it, and
-- record.RebuildReports uses it to rebuild a company's counters.
-- +goose StatementBegin
CREATE FUNCTION parley_report_counts(p_company bigint)
RETURNS TABLE (subject_kind text, subject_id bigint, hour timestamptz, metric text, code integer,
    label text, n bigint)
LANGUAGE sql STABLE AS $$
    WITH m AS (
        SELECT CASE WHEN b.campaign_id IS NOT NULL THEN 'campaign' WHEN b.automation_id IS NOT NULL THEN 'automation'
                ELSE b.kind::text END AS subject_kind,
            COALESCE(b.campaign_id, b.automation_id, 0) AS subject_id,
            m.state, m.created_at, m.updated_at, m.sent_at, m.delivered_at, m.read_at, m.failed_at, m.cancelled_at,
            m.replied_at, m.error_code, m.error_title, m.billable, m.pricing_category
        FROM messages m JOIN batches b ON b.id = m.batch_id
        WHERE m.company_id = p_company
    ), e AS (
        SELECT m.subject_kind, m.subject_id, x.at, x.metric, x.code, x.label
        FROM m, LATERAL (VALUES
            (m.created_at, 'accepted', 0, ''),
            (COALESCE(m.sent_at, CASE WHEN m.state IN ('delivered', 'read') THEN COALESCE(m.delivered_at, m.read_at) END),
                'sent', 0, ''),
            (m.delivered_at, 'delivered', 0, ''),
            (m.read_at, 'read', 0, ''),
            (m.replied_at, 'replied', 0, ''),
            (CASE WHEN m.state = 'failed' THEN m.failed_at END, 'failed', COALESCE(m.error_code, 0),
                left(COALESCE(m.error_title, ''), 200)),
            (CASE WHEN m.state = 'skipped_opt_out' THEN m.updated_at END, 'skipped_opt_out', 0, ''),
            (CASE WHEN m.state = 'cancelled' THEN COALESCE(m.cancelled_at, m.updated_at) END, 'cancelled', 0, ''),
            (CASE WHEN m.billable AND m.delivered_at IS NOT NULL THEN m.delivered_at END, 'billable', 0,
                COALESCE(m.pricing_category, '')),
            (CASE WHEN m.state NOT IN ('queued', 'scheduled', 'deferred', 'sending')
                THEN COALESCE(m.sent_at, m.failed_at, m.cancelled_at, m.delivered_at, m.updated_at) END, 'left', 0, '')
        ) AS x(at, metric, code, label)
        WHERE x.at IS NOT NULL
    )
    SELECT subject_kind, subject_id, date_trunc('hour', at, 'UTC'), metric, code, label, count(*)
    FROM e GROUP BY 1, 2, 3, 4, 5, 6
$$;
-- +goose StatementEnd

INSERT INTO report_hours (company_id, subject_kind, subject_id, hour, metric, code, label, n)
SELECT c.id, r.subject_kind, r.subject_id, r.hour, r.metric, r.code, r.label, r.n
FROM companies c, LATERAL parley_report_counts(c.id) r;

-- +goose Down
DROP TABLE report_hours, report_deltas;
DROP FUNCTION parley_report_counts(bigint);
ALTER TABLE provider_status_backlog DROP COLUMN billable, DROP COLUMN pricing_category, DROP COLUMN pricing_model;
ALTER TABLE messages DROP COLUMN billable, DROP COLUMN pricing_category, DROP COLUMN pricing_model,
    DROP COLUMN replied_at, DROP COLUMN prior_state;
