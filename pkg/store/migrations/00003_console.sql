-- +goose Up
-- The admin console's sign-in state.

-- Console sessions, in the shape github.com/alexedwards/scs/pgxstore reads
-- and writes (it names the table "sessions"). data holds the scs-encoded
-- session values: the signed-in user's id and one-shot notices, never a
-- password or an API key.
CREATE TABLE sessions (
    token  text        PRIMARY KEY,
    data   bytea       NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- One row per failed console sign-in, counted over a sliding window per
-- email address and per client network to throttle password guessing. Kept
-- in PostgreSQL so that every admin replica sees the same count and a
-- restart does not reset it; rows older than the window are deleted as new
-- failures are recorded.
CREATE TABLE login_failures (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- 'email': the lower-cased address typed in; 'ip': the client address
    -- (an IPv6 client's /64).
    scope     text        NOT NULL CHECK (scope IN ('email', 'ip')),
    subject   text        NOT NULL CHECK (length(subject) BETWEEN 1 AND 320),
    failed_at timestamptz NOT NULL
);
CREATE INDEX login_failures_subject_idx ON login_failures (scope, subject, failed_at);
CREATE INDEX login_failures_failed_at_idx ON login_failures (failed_at);

-- +goose Down
DROP TABLE login_failures, sessions;
