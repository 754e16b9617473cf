-- Observability and events.
-- * The outbox: lifecycle events of jobs and applications' own events, written in the
--   transaction of the change they report and published to EventBridge afterwards, so an
--   outage delays events and loses none. Every path that makes a job dead writes its
--   `Job Dead` event (trigger jobs_outbox_dead); the finish writes the events a type opted
--   into; applications insert only their own events, which they alone read; operators
--   see the backlog's size and age (tickq.operator_outbox_backlog), no event.
-- * tickq.jobs.traceparent: the enqueuer's trace context when OpenTelemetry is on, from the
--   transaction's setting tickq.traceparent (null without it).

alter table tickq.jobs add column traceparent text;
alter table tickq.jobs
    alter column traceparent set default nullif(current_setting('tickq.traceparent', true), '');
alter table tickq.jobs
    add constraint jobs_traceparent_check check (
        traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
grant insert (traceparent) on tickq.jobs to tickq_app;

create table tickq.outbox (
    id           bigint generated always as identity primary key,
    event_id     uuid not null default gen_random_uuid(),
    job_id       uuid,
    user_id      uuid,
    source       text not null default 'tickq',
    detail_type  text not null,
    detail       jsonb not null,
    created_at   timestamptz not null default now(),
    published_at timestamptz,
    attempts     integer not null default 0,
    last_error   text,

    constraint outbox_source_check check (char_length(source) between 1 and 256),
    constraint outbox_detail_type_check check (char_length(detail_type) between 1 and 128),
    -- EventBridge takes an entry of at most 256 KB: a bigger one could never be published.
    constraint outbox_detail_check check (
        jsonb_typeof(detail) = 'object' and octet_length(detail::text) <= 200000),
    constraint outbox_attempts_check check (attempts >= 0)
);

-- The publisher reads the pending events oldest first; the backlog's count and age too.
create index outbox_pending_idx on tickq.outbox (id) where published_at is null;
-- Retention deletes the events published before its cut-off.
create index outbox_published_idx on tickq.outbox (published_at) where published_at is not null;

-- The `Job Dead` event of a job that becomes dead (trigger jobs_outbox_dead, triggers.sql),
-- in the outbox in the same transaction: an EventBridge outage delays it, never loses it.
-- The detail is what the event always carried (id, type, queue, attempts, error); the
-- publisher adds the event's id. Security definer: the insert is the schema owner's, so a
-- path to dead that an application's transaction takes still writes it, while
-- applications may not write tickq's own events themselves (policies.sql).
create or replace function tickq.outbox_job_dead() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.outbox (job_id, user_id, detail_type, detail)
    values (new.id, new.user_id, 'Job Dead', jsonb_build_object(
        'id', new.id, 'type', new.type, 'queue', new.queue, 'attempts', new.attempts,
        'error', left(new.error, 4000)));
    return new;
end $$;

create trigger jobs_outbox_dead before update on tickq.jobs
    for each row
    when (new.status = 'dead' and old.status <> 'dead')
    execute function tickq.outbox_job_dead();

grant select, insert, update, delete on tickq.outbox to tickq_worker;
grant select on tickq.outbox to tickq_app;
grant insert (user_id, source, detail_type, detail) on tickq.outbox to tickq_app;

alter table tickq.outbox enable row level security;
alter table tickq.outbox force row level security;

create policy outbox_owner on tickq.outbox for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy outbox_owner_publish on tickq.outbox for insert to tickq_app
    with check (user_id = tickq.current_user_id() and job_id is null
                and source <> 'tickq' and published_at is null and attempts = 0);
create policy outbox_worker on tickq.outbox to tickq_worker using (true) with check (true);

do $$
begin
    execute format('create policy outbox_table_owner on tickq.outbox to %I using (true) with check (true)',
                   (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
                    where c.oid = 'tickq.outbox'::regclass));
end $$;

revoke all on function tickq.outbox_job_dead() from public;

-- The outbox's backlog for the operator console: how many events wait to be published, how
-- long the oldest has waited at p_now (the database clock when null), and the most sends
-- one of them has had. Counts only: operators read no event.
create or replace function tickq.operator_outbox_backlog(p_now timestamptz)
    returns table (pending bigint, oldest_seconds double precision, most_attempts integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select count(*),
       extract(epoch from coalesce(p_now, now()) - min(o.created_at))::double precision,
       coalesce(max(o.attempts), 0)
from tickq.outbox o
where o.published_at is null
$$;

revoke all on function tickq.operator_outbox_backlog(timestamptz) from public;
grant execute on function tickq.operator_outbox_backlog(timestamptz)
    to tickq_operator, tickq_worker;
