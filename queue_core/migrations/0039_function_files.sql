-- Function text lives in queue_core/schema/functions/ alone, applied again by the migrator
-- whenever a file's text differs from the one a database last applied: this records which.
create table if not exists tickq.schema_functions (
    file       text primary key,
    digest     text not null,
    applied_at timestamptz not null default now()
);
