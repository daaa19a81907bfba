-- +goose Up
-- Cancelling a batch (POST /api/batches/{batch_id}/cancel, pkg/batchctl):
-- every message not yet handed to the provider becomes 'cancelled', a
-- terminal state. A batch cancelled while still in the stream is recorded
-- here with status 'cancelled' before any dispatcher expands it; the
-- expander then creates its messages as cancelled.
ALTER TYPE message_state ADD VALUE IF NOT EXISTS 'cancelled';
-- cancelled: no message of the batch was handed to the provider. A batch
-- cancelled after some were is 'completed' with a cancelled count.
ALTER TYPE batch_status ADD VALUE IF NOT EXISTS 'cancelled';

ALTER TABLE batches
    -- when the batch was first cancelled; messages that come back to the
    -- queue afterwards (a retry, a released claim) are cancelled too.
    ADD COLUMN cancelled_at timestamptz;

ALTER TABLE messages
    -- the times of the states that had none, for GET /api/batches/{id}/messages.
    ADD COLUMN cancelled_at timestamptz,
    ADD COLUMN deferred_at  timestamptz;

-- +goose Down
-- Enum values cannot be dropped; rows in the new states would be left
-- without a meaning, so they go back to failed with a note.
UPDATE messages SET state = 'failed', error_title = 'cancelled', failed_at = cancelled_at WHERE state::text = 'cancelled';
UPDATE batches SET status = 'completed', completed_at = COALESCE(completed_at, cancelled_at) WHERE status::text = 'cancelled';
ALTER TABLE messages DROP COLUMN deferred_at, DROP COLUMN cancelled_at;
ALTER TABLE batches DROP COLUMN cancelled_at;
