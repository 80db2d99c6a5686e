-- callbound database schema, version 1 (SQLite). FROZEN: never edit; add db_schema_v2_sqlite.sql and a migration.
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE operations (
    id INTEGER PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE,
    tenant TEXT,
    state TEXT,
    created_at TEXT,
    updated_at TEXT,
    head TEXT NOT NULL,
    journal_len INTEGER NOT NULL DEFAULT 0,
    audit_len INTEGER NOT NULL DEFAULT 0,
    fence INTEGER,
    lease_owner TEXT,
    lease_expires_at REAL,
    wake_us INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX operations_tenant ON operations (tenant, id);
CREATE INDEX operations_state ON operations (state, id);
CREATE INDEX operations_wake ON operations (state, wake_us);
CREATE TABLE journal (
    operation_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (operation_id, pos)
) WITHOUT ROWID;
CREATE TABLE audit (
    operation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (operation_id, seq)
) WITHOUT ROWID;
CREATE TABLE ledger (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    status TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE approvals (
    id INTEGER PRIMARY KEY,
    approval_id TEXT NOT NULL UNIQUE,
    operation_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    status TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX approvals_status_tenant_created ON approvals (status, tenant, created_us, id);
CREATE INDEX approvals_status_created ON approvals (status, created_us, id);
CREATE INDEX approvals_tenant_created ON approvals (tenant, created_us, id);
CREATE INDEX approvals_status_expires ON approvals (status, expires_us);
CREATE INDEX approvals_operation ON approvals (operation_id, status);
