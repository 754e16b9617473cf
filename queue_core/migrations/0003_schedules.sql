-- Cron schedules: each row enqueues one job per due occurrence of its expression.
create table tickq.schedules (
    name         text primary key,
    cron         text not null,
    timezone     text not null default 'UTC',
    type         text not null,
    payload      jsonb not null default '{}'::jsonb,
    queue        text not null default 'default',
    priority     integer not null default 0,
    max_attempts integer not null default 3,
    -- After downtime: 'latest' fires the most recent missed occurrence once, 'skip' fires
    -- nothing that is more than the grace period late.
    missed       text not null default 'latest',
    enabled      boolean not null default true,
    -- The last occurrence that was enqueued, and the next one not yet handled. Occurrences
    -- before next_at are done (fired or skipped): the scheduler never looks at them again,
    -- so a job that went dead or was pruned cannot make its occurrence fire twice.
    last_fired   timestamptz,
    next_at      timestamptz not null,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),

    constraint schedules_missed_check check (missed in ('latest', 'skip')),
    constraint schedules_payload_object check (jsonb_typeof(payload) = 'object'),
    constraint schedules_max_attempts_check check (max_attempts >= 1)
);

-- The scheduler reads only enabled schedules whose next occurrence has come.
create index schedules_due_idx on tickq.schedules (next_at) where enabled;

grant select, insert, update, delete on tickq.schedules to tickq_worker;
