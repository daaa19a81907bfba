-- +goose NO TRANSACTION
-- +goose Up
-- GET /api/contacts/{phone}/messages: a company's messages to one number,
-- newest first, a page at a time. Built CONCURRENTLY (outside a
-- transaction) so that a large messages table keeps taking writes while it
-- builds; IF NOT EXISTS lets an interrupted build be retried.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_phone_idx ON messages (company_id, phone, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS messages_phone_idx;
