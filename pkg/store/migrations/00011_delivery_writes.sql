-- +goose Up
-- Fewer writes per message on the dispatchers' path (issue 14): a message
-- is inserted, then updated once with its outcome; every index entry and
-- foreign-key check on those two writes is paid per message.

-- The wamid is unique among the messages that have one; a message not yet
-- sent (every message at insertion) has no entry. Status callbacks look a
-- wamid up by equality, which this index serves.
CREATE UNIQUE INDEX messages_provider_message_id_unique ON messages (provider_message_id)
    WHERE provider_message_id IS NOT NULL;
ALTER TABLE messages DROP CONSTRAINT messages_provider_message_id_key;

-- A message's company is its batch's (the expansions copy it), and a batch
-- is removed with its company, its messages with it (ON DELETE CASCADE on
-- batches.company_id and messages.batch_id): the check of every inserted
-- message against companies added nothing.
ALTER TABLE messages DROP CONSTRAINT messages_company_id_fkey;

-- Templates and messaging accounts are never deleted but with their
-- company (which takes its batches and messages along): the check of every
-- inserted message against them guarded against nothing Parley does, and
-- a message whose template or account is gone fails when it is sent
-- ("load template", "messaging account"), as one whose rows were edited.
ALTER TABLE messages DROP CONSTRAINT messages_template_id_fkey,
    DROP CONSTRAINT messages_messaging_account_id_fkey;

-- +goose Down
ALTER TABLE messages ADD CONSTRAINT messages_template_id_fkey FOREIGN KEY (template_id) REFERENCES templates (id),
    ADD CONSTRAINT messages_messaging_account_id_fkey FOREIGN KEY (messaging_account_id) REFERENCES messaging_accounts (id);
ALTER TABLE messages ADD CONSTRAINT messages_company_id_fkey
    FOREIGN KEY (company_id) REFERENCES companies (id) ON DELETE CASCADE;
ALTER TABLE messages ADD CONSTRAINT messages_provider_message_id_key UNIQUE (provider_message_id);
DROP INDEX messages_provider_message_id_unique;
