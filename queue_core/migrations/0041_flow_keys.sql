-- Flow keys: a job carries up to 8 keys naming what it touches (a customer, a downstream
-- account), given by its caller or filled from its payload by its task's templates; limits
-- per key prefix (a cap of running jobs and a rate of starts, per key) and holds (a key
-- kept from starting until a time) are enforced inside every claim while any exists. An
-- outside caller's keys are stored under its owner.

alter table tickq.jobs add column flow_keys text[] not null default '{}';

alter table tickq.jobs add constraint jobs_flow_keys_check check (
    cardinality(flow_keys) <= 8
    and (flow_keys = '{}'
         or (array_ndims(flow_keys) = 1 and array_position(flow_keys, null) is null
             and array_to_string(flow_keys, ',') collate "C"
                 ~ '^[A-Za-z0-9_.:/@=+-]{1,240}(,[A-Za-z0-9_.:/@=+-]{1,240})*$')));

-- Flow limits: per key prefix, at most max_running jobs of EACH key it governs running at
-- once across every worker, and at most rate_limit starts of each key in any
-- rate_period_seconds window. A key is governed by its longest limited prefix. Enforced in
-- every claim while any limit or hold exists (tickq.flow_admit); running counts are read
-- from the jobs themselves, so a reclaimed lease frees its key and nothing leaks.
create table tickq.flow_limits (
    prefix              text primary key,
    max_running         integer,
    rate_limit          integer,
    rate_period_seconds double precision,
    updated_at          timestamptz not null default now(),

    constraint flow_limits_prefix_check check (
        prefix collate "C" ~ '^[A-Za-z0-9_.:/@=+-]{1,240}$'),
    constraint flow_limits_max_running_check check (
        max_running is null or max_running between 1 and 100000),
    constraint flow_limits_rate_check check (
        (rate_limit is null) = (rate_period_seconds is null)
        and (rate_limit is null or rate_limit between 1 and 10000)
        and (rate_period_seconds is null
             or (rate_period_seconds > 0 and rate_period_seconds <= 86400))),
    constraint flow_limits_some_check check (max_running is not null or rate_limit is not null)
);

-- A key held (a handler told to back off, or an operator): no job of it starts before
-- `until`, at most a day after the hold was set.
create table tickq.flow_holds (
    key        text primary key,
    until      timestamptz not null,
    set_at     timestamptz not null default now(),

    constraint flow_holds_key_check check (key collate "C" ~ '^[A-Za-z0-9_.:/@=+-]{1,240}$'),
    constraint flow_holds_until_check check (
        until <= set_at + interval '1 day'
        and until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);

-- The starts of rate-limited keys, one row per job started (appended by the claim, never
-- updated: no row that every claim of a busy key rewrites), pruned past the key's period.
create table tickq.flow_starts (
    key text not null,
    at  timestamptz not null
);

-- The claim counts a key's starts in its window.
create index flow_starts_key_idx on tickq.flow_starts (key, at);

-- Flow limits and holds are the workers' (a handler holds its key); the starts of
-- rate-limited keys are written by the claim, which runs as the worker. Applications read
-- none of them (a hold names another owner's key): they learn only whether any limit or
-- hold exists (tickq.flow_active), as the store's probe asks.
grant select, insert, update, delete on tickq.flow_limits, tickq.flow_holds,
    tickq.flow_starts to tickq_worker;

-- tickq.enqueue takes flow_keys: a new signature, so the old function goes.
drop function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text,
                            double precision, double precision, text, double precision);

-- Its functions are in their files (schema/functions/), with who may run them.
