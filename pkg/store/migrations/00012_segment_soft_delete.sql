-- +goose Up
-- A segment is soft-deleted (DELETE /api/segments/{segment_id}): the row
-- stays so that past batches keep their segment_id and still show its
-- name; its memberships are removed. Only live segments hold a name (a
-- deleted segment's name can be given again) and count towards
-- companies.max_segments.
ALTER TABLE segments ADD COLUMN deleted_at timestamptz;
ALTER TABLE segments DROP CONSTRAINT segments_company_id_name_key;
-- Serves the name check and the listing by name.
CREATE UNIQUE INDEX segments_live_name_idx ON segments (company_id, name) WHERE deleted_at IS NULL;
-- The delete's check for batches that still wait to expand or send to it.
CREATE INDEX batches_segment_idx ON batches (segment_id) WHERE segment_id IS NOT NULL;

-- +goose Down
DROP INDEX batches_segment_idx;
DROP INDEX segments_live_name_idx;
-- Deleted segments go for good: they may share a name with a live one.
DELETE FROM segments s WHERE s.deleted_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.segment_id = s.id);
UPDATE segments SET name = left(name, 200) || ' (deleted ' || id || ')' WHERE deleted_at IS NOT NULL;
ALTER TABLE segments ADD CONSTRAINT segments_company_id_name_key UNIQUE (company_id, name);
ALTER TABLE segments DROP COLUMN deleted_at;
