-- +goose Up
-- A connector is reached at POST /api/<name>/send, next to the API's own
-- routes: a connector named like the first segment of one of them would never
-- be reached (the static route wins). Keep in step with
-- catalog.ReservedConnectorNames.
ALTER TABLE connectors ADD CONSTRAINT connectors_name_not_reserved
    CHECK (name NOT IN ('automations', 'batch', 'batches', 'campaigns', 'docs', 'segments'));

-- +goose Down
ALTER TABLE connectors DROP CONSTRAINT connectors_name_not_reserved;
