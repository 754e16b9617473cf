-- Retention policies: which finished jobs pruning deletes. A job is governed by the most
-- specific policy matching it (queue and type, then type, then queue, then the catch-all);
-- jobs no policy matches are kept, and so are dead jobs unless a policy lists 'dead'.
create table tickq.retention_policies (
    id               bigint generated always as identity primary key,
    queue            text,
    type             text,
    statuses         text[] not null default '{succeeded,cancelled}',
    max_age_seconds  double precision,
    keep_last        integer,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),

    constraint retention_policies_scope_key unique nulls not distinct (queue, type),
    constraint retention_policies_statuses_check check (
        cardinality(statuses) >= 1
        and statuses <@ array['succeeded', 'cancelled', 'dead']::text[]),
    constraint retention_policies_rule_check check (
        max_age_seconds is not null or keep_last is not null),
    constraint retention_policies_max_age_check check (
        max_age_seconds is null or max_age_seconds >= 0),
    constraint retention_policies_keep_last_check check (keep_last is null or keep_last >= 0)
);

grant select, insert, update, delete on tickq.retention_policies to tickq_worker;
