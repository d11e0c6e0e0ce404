-- The email-events example's tables. `IF NOT EXISTS`: databases created by
-- earlier versions of the example (before it used sqlx's migrator) adopt this
-- migration without error.
CREATE TABLE IF NOT EXISTS emails (
    email_id        TEXT PRIMARY KEY,
    recipient       TEXT NOT NULL,
    status          TEXT,
    status_at       INTEGER,
    opened_at       INTEGER,
    clicked_at      INTEGER,
    unsubscribed_at INTEGER
);

CREATE TABLE IF NOT EXISTS suppressions (
    recipient TEXT PRIMARY KEY,
    reason    TEXT NOT NULL,
    since     INTEGER NOT NULL,
    email_id  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS event_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL,
    email_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    changed     INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS event_log_event_id ON event_log (event_id);
