-- Tenancy bounds for application users, enforced where every insert and update of the
-- application role passes: run_after within 366 days and every time readable; a queue's
-- max_depth counting jobs waiting for parents; a cap of live jobs per owner and queue
-- (queue_limits.max_depth_per_owner); at most 1000 children per parent and 100 signals per
-- job; dependency edges only between jobs of one owner; and a guard that compares the
-- whole row, so no sequence of updates reaches a change outside the documented operations.

alter table tickq.queue_limits alter column max_depth drop not null;
alter table tickq.queue_limits add column max_depth_per_owner integer;
alter table tickq.queue_limits
    add constraint queue_limits_per_owner_check check (max_depth_per_owner >= 1);
alter table tickq.queue_limits
    add constraint queue_limits_some_check
    check (max_depth is not null or max_depth_per_owner is not null);

create index jobs_waiting_idx on tickq.jobs_live (queue) where status = 'waiting';

-- Whether a time the application writes can be read back by a worker: finite, and inside the
-- years 1-9999 a Python datetime holds in any time zone (a day of margin each side). A
-- job with `-infinity` or the year 10000 would break every claim and listing that reads it.
create or replace function tickq.readable_time(p_at timestamptz) returns boolean
    language sql immutable parallel safe
    as $$
    select p_at is null
        or p_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
$$;

-- Admission for application users: checked by the insert itself (and by a retry, whose row
-- moves back into the live partition as an insert), so every insert path of the
-- application role is bounded, the API's and plain SQL alike, and the application role
-- never calls tickq.queue_admit (which told it every user's queue depth and let it hold the
-- limit lock at will). The bounds:
-- * every time written is one a worker can read back (tickq.readable_time), and run_after
--   is at most 366 days ahead, as the API's `delay` is;
-- * under the queue limit row's lock, counted with a fresh snapshot that includes the new
--   rows: at most max_depth jobs waiting to run in the queue (queued, retrying, and waiting
--   for parents, which become queued without asking), and at most max_depth_per_owner live
--   jobs of this owner in it.
-- A refusal raises, so the statement writes nothing. Rows that land finished (a cancel moved
-- into the finished partitions) are no admission.
create or replace function tickq.jobs_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_max   integer;
    v_owner integer;
    v_depth bigint;
begin
    -- A job that a cancel moves into the finished partitions is no admission.
    if new.status not in ('queued', 'waiting') then
        return null;
    end if;
    if not (tickq.readable_time(new.run_after) and tickq.readable_time(new.created_at)
            and tickq.readable_time(new.updated_at)) then
        raise exception 'tickq: a job''s times must be finite dates of the years 1-9999'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    if new.run_after > now() + interval '366 days' then
        raise exception 'tickq: run_after may be at most 366 days ahead'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    select l.max_depth, l.max_depth_per_owner into v_max, v_owner
    from tickq.queue_limits l where l.queue = new.queue
    for update;
    if v_max is not null then
        select (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = new.queue and j.status in ('queued', 'retrying')
                      limit v_max + 1) r)
             + (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = new.queue and j.status = 'waiting'
                      limit v_max + 1) w)
        into v_depth;
        if v_depth > v_max then
            raise exception 'tickq: queue % is full', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_max::text;
        end if;
    end if;
    if v_owner is not null then
        select count(*) into v_depth
        from (select 1 from tickq.jobs j
              where j.user_id = new.user_id and j.queue = new.queue
                and j.status in ('waiting', 'queued', 'running', 'retrying')
              limit v_owner + 1) o;
        if v_depth > v_owner then
            raise exception 'tickq: queue % is full for this owner', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_owner::text;
        end if;
    end if;
    return null;
end $$;

-- Applications may change a job only through the documented operations
-- (docs/threat-model.md), each one a set of columns it may move and how: cancel a job not
-- yet running (a waiting one with an error naming the failed ancestor when the cascade of
-- tickq.jobs_settle does it), ask a running job to cancel, send a dead or cancelled job back
-- to the queue with fresh attempts, mark a parent as having children, deliver a signal, and
-- forget a finished job's wait and signals before a fresh retry. The guard compares the
-- whole row (every column, those added later too): an update that moves any column its
-- operation does not list raises insufficient_privilege, so no sequence of statements can
-- combine two operations' freedoms. Every time written must be one a worker can read back
-- (tickq.readable_time), and a job holds at most 100 signals.
--
-- Its trigger's condition (jobs_app_guard, triggers.sql) is only its gate, an application
-- user's transaction (tickq.user_id set): PostgreSQL reads a row trigger's condition back
-- from its stored text and compiles it for every statement that updates the table, whoever
-- runs it, so a longer condition cost every worker's batch about 4 % of its server time at
-- batch 100 (docs/benchmarks.md, "Server work per job"). A PL/pgSQL body is compiled once
-- per session instead.
create or replace function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
declare
    v_old   jsonb := to_jsonb(old);
    v_moved text[];
    v_sent  text;
begin
    select coalesce(array_agg(n.key order by n.key), '{}') into v_moved
    from jsonb_each(to_jsonb(new)) n
    where n.value is distinct from v_old -> n.key;
    if v_moved = '{}' then
        return new;
    end if;
    if not (tickq.readable_time(new.run_after) and tickq.readable_time(new.updated_at)
            and tickq.readable_time(new.finished_at)
            and tickq.readable_time(new.wait_until)) then
        raise exception 'tickq: a job''s times must be finite dates of the years 1-9999'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    -- Deliver a signal: one new name appended to a live job's signals; the job wakes
    -- (run_after earlier) only if it waits for that very name.
    v_sent := new.signals[cardinality(new.signals)];
    if (v_moved <@ array['signals', 'run_after', 'updated_at']
        and 'signals' = any(v_moved)
        and old.status in ('waiting', 'queued', 'running', 'retrying')
        and new.signals = coalesce(old.signals, '{}') || v_sent
        and not v_sent = any(coalesce(old.signals, '{}'))
        and (not 'run_after' = any(v_moved)
             or (old.status in ('queued', 'retrying') and old.wait_kind = 'signal'
                 and old.wait_name = v_sent and new.run_after < old.run_after))) is true then
        if cardinality(new.signals) > 100 then
            raise exception 'tickq: a job holds at most 100 signals'
                using errcode = 'TQ422', detail = 'signal';
        end if;
        return new;
    end if;
    -- Forget a finished job's wait and signals (before a fresh retry).
    if (v_moved <@ array['resumes', 'wait_kind', 'wait_name', 'wait_until', 'signals']
        and old.status in ('dead', 'cancelled')
        and new.resumes is null and new.wait_kind is null and new.wait_name is null
        and new.wait_until is null and new.signals is null) is true then
        return new;
    end if;
    -- Cancel a job not yet running; the error only as the dependency cascade writes it,
    -- naming a failed job of this owner.
    if (v_moved <@ array['status', 'finished_at', 'updated_at', 'cancel_requested', 'error']
        and new.status = 'cancelled' and old.status in ('queued', 'retrying', 'waiting')
        and not new.cancel_requested and new.finished_at is not null
        and (not 'error' = any(v_moved)
             or (old.status = 'waiting'
                 and new.error ~ '^parent [0-9a-f-]{36} is (dead|cancelled)$'
                 and exists (select from tickq.jobs r
                             where r.id = substr(new.error, 8, 36)::uuid
                               and r.status in ('dead', 'cancelled'))))) is true then
        return new;
    end if;
    -- Ask a running job to cancel.
    if (v_moved <@ array['cancel_requested', 'updated_at'] and old.status = 'running'
        and new.cancel_requested) is true then
        return new;
    end if;
    -- Send a dead or cancelled job back to the queue with fresh attempts.
    if (v_moved <@ array['status', 'attempts', 'run_after', 'cancel_requested', 'finished_at',
                         'updated_at']
        and new.status = 'queued' and old.status in ('dead', 'cancelled')
        and new.attempts = 0 and not new.cancel_requested and new.finished_at is null
        and new.run_after <= now() + interval '366 days') is true then
        return new;
    end if;
    -- Mark a parent as having children.
    if (v_moved = array['has_children'] and new.has_children) is true then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %, changing %)',
        old.status, new.status, array_to_string(v_moved, ', ')
        using errcode = 'insufficient_privilege';
end $$;

-- Backpressure for enqueue: lock the limit rows of the given queues (so concurrent enqueuers
-- of one limited queue take turns), then return those that the incoming jobs would overflow.
-- Security definer: depth counts every waiting job, including rows that row-level security
-- hides from the enqueuing application user. Waiting means queued, retrying, or waiting for
-- parents (which become queued without asking). A queue limited per owner only (no
-- max_depth) is never full here: owners' caps bind application users (jobs_app_admit).
create or replace function tickq.queue_admit(p_queues text[], p_counts integer[])
    returns table (queue text, depth bigint, max_depth integer)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_limits record;
begin
    for v_limits in
        select l.queue, l.max_depth
        from tickq.queue_limits l
        where l.queue = any(p_queues) and l.max_depth is not null
        order by l.queue
        for update
    loop
        queue := v_limits.queue;
        max_depth := v_limits.max_depth;
        -- Counted after the lock: a fresh snapshot that includes the previous holder's jobs.
        -- Bounded by max_depth + 1 rows of jobs_claim_idx and of jobs_waiting_idx, however
        -- deep the queue is.
        select (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = v_limits.queue and j.status in ('queued', 'retrying')
                      limit v_limits.max_depth + 1) r)
             + (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = v_limits.queue and j.status = 'waiting'
                      limit v_limits.max_depth + 1) w)
        into depth;
        if depth + (select sum(c.n) from unnest(p_queues, p_counts) c (q, n)
                    where c.q = v_limits.queue) > v_limits.max_depth then
            return next;
        end if;
    end loop;
end $$;

-- Dependency edges an application user writes, by any statement: both ends are jobs of the
-- edge's owner (a policy cannot check it, since the ends are usually inserted by the same
-- statement as the edge and a policy's subquery does not see them; this AFTER trigger
-- does), and a parent has at most 1000 children, which bounds what one tenant's finishing
-- parent releases or cancels. Security definer: it reads the ends whoever owns them, to
-- refuse a foreign one rather than not find it.
create or replace function tickq.job_dependencies_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_children bigint;
begin
    if (select count(*) from tickq.jobs j
        where j.id in (new.child_id, new.parent_id)
          and j.user_id is not distinct from new.user_id) <> 2 then
        raise exception 'tickq: a dependency joins only jobs of one owner'
            using errcode = 'insufficient_privilege';
    end if;
    select count(*) into v_children
    from (select 1 from tickq.job_dependencies d
          where d.parent_id = new.parent_id limit 1001) c;
    if v_children > 1000 then
        raise exception 'tickq: a job may have at most 1000 children'
            using errcode = 'TQ422', detail = 'after';
    end if;
    return null;
end $$;

-- At most 100 signals per job, however an application user inserts them (the API's send
-- checks it first, with the same clear error): a job's signals are on every view of it.
create or replace function tickq.job_signals_app_admit() returns trigger
    language plpgsql volatile
    as $$
begin
    if (select count(*)
        from (select 1 from tickq.job_signals s where s.job_id = new.job_id limit 101) n)
       > 100 then
        raise exception 'tickq: a job holds at most 100 signals'
            using errcode = 'TQ422', detail = 'signal';
    end if;
    return null;
end $$;

create trigger job_dependencies_app_admit after insert on tickq.job_dependencies
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.job_dependencies_app_admit();

revoke all on function tickq.job_dependencies_app_admit() from public;

create trigger job_signals_app_admit after insert on tickq.job_signals
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.job_signals_app_admit();

revoke all on function tickq.job_signals_app_admit() from public;
