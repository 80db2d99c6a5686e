-- callbound database schema, version 1 (PostgreSQL). FROZEN: never edit; add db_schema_v2_postgres.sql and a migration.
CREATE TABLE meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE operations (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id text NOT NULL UNIQUE,
    tenant text,
    state text,
    created_at text,
    updated_at text,
    head json NOT NULL,
    journal_len integer NOT NULL DEFAULT 0,
    audit_len integer NOT NULL DEFAULT 0,
    fence bigint,
    lease_owner text,
    lease_expires_at timestamptz,
    wake_at timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE INDEX operations_tenant ON operations (tenant, id);
CREATE INDEX operations_state ON operations (state, id);
CREATE INDEX operations_wake ON operations (state, wake_at);
CREATE TABLE journal (
    operation_id text NOT NULL,
    pos integer NOT NULL,
    kind text NOT NULL,
    data json NOT NULL,
    PRIMARY KEY (operation_id, pos)
);
CREATE TABLE audit (
    operation_id text NOT NULL,
    seq integer NOT NULL,
    kind text NOT NULL,
    at text NOT NULL,
    data json NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
CREATE TABLE ledger (
    tenant text NOT NULL,
    key text NOT NULL,
    operation_id text NOT NULL,
    status text NOT NULL,
    entry json NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE approvals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    approval_id text NOT NULL UNIQUE,
    operation_id text NOT NULL,
    tenant text NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    data json NOT NULL
);
CREATE INDEX approvals_status_tenant_created ON approvals (status, tenant, created_at, id);
CREATE INDEX approvals_status_created ON approvals (status, created_at, id);
CREATE INDEX approvals_tenant_created ON approvals (tenant, created_at, id);
CREATE INDEX approvals_status_expires ON approvals (status, expires_at);
CREATE INDEX approvals_operation ON approvals (operation_id, status);
