-- +goose Up
-- Held messages by template (released or failed together) and by when they
-- may go (the messaging limit's room): only held rows have an entry. Its own
-- migration: an enum value added in a transaction cannot be used in it.
CREATE INDEX messages_held_idx ON messages (template_id, not_before) WHERE state = 'held';

-- A held message has not left: parley_report_counts counts it waiting.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parley_report_counts(p_company bigint)
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
            (CASE WHEN m.state NOT IN ('queued', 'scheduled', 'deferred', 'sending', 'held')
                THEN COALESCE(m.sent_at, m.failed_at, m.cancelled_at, m.delivered_at, m.updated_at) END, 'left', 0, '')
        ) AS x(at, metric, code, label)
        WHERE x.at IS NOT NULL
    )
    SELECT subject_kind, subject_id, date_trunc('hour', at, 'UTC'), metric, code, label, count(*)
    FROM e GROUP BY 1, 2, 3, 4, 5, 6
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parley_report_counts(p_company bigint)
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
DROP INDEX messages_held_idx;
