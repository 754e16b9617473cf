-- Durable workflows: steps that retry on their own (job.step(..., retry=Retry(...))), the
-- undos that compensate a job's completed steps when it ends dead or cancelled, and child
-- jobs a step enqueues and awaits (job.map, job.call). New tables for the tries and the
-- child links; a suspended parent waits for its children (wait kind 'children'), counted
-- down and woken by its children's finish through tickq.jobs_settle, which finishing jobs
-- with has_children already call; a deleted job takes its tries and children with it.

alter table tickq.jobs drop constraint jobs_wait_kind_check;
alter table tickq.jobs add constraint jobs_wait_kind_check check (
    wait_kind in ('suspend', 'sleep', 'signal', 'children'));

-- Durable workflows (queue_core/steps.py): the tries of steps that retry on their own, the
-- undos that compensated a job's completed steps, and the job's compensation itself (the
-- status it ends in and the error that ended it, kept while its undos run). One row per
-- (job, kind, name), so each try count and each undo is stored once.
create table tickq.job_step_tries (
    job_id  uuid not null,
    kind    text not null,
    name    text not null,
    tries   integer not null default 0,
    error   text,
    at      timestamptz not null,
    done_at timestamptz,              -- an undo that ran to the end
    primary key (job_id, kind, name),
    constraint job_step_tries_kind_check check (kind in ('step', 'undo', 'compensation'))
);

-- Child jobs a running job enqueued in a step (job.map, job.call), in the step's order.
-- Written with the parent's suspension in one statement, so a parent never enqueues its
-- children twice. max_running: how many of the step's children may be runnable at once
-- (the rest wait and are released as siblings end, by tickq.job_children_settle).
create table tickq.job_children (
    parent_id   uuid not null,
    step        text not null,
    idx         integer not null,
    child_id    uuid not null,
    user_id     uuid,
    max_running integer not null,
    siblings    integer not null,     -- the step's children in all
    primary key (parent_id, step, idx),
    constraint job_children_max_running_check check (max_running >= 1)
);

-- A child's finish finds its parent by the child's id.
create index job_children_child_idx on tickq.job_children (child_id);

-- Step tries, undos and child links as the steps: applications see those of their own
-- jobs, and only a finished job's may go (a retry that forgets steps); workers see and
-- write everything.
grant select, insert, update, delete on tickq.job_step_tries, tickq.job_children
    to tickq_worker;
grant select, delete on tickq.job_step_tries, tickq.job_children to tickq_app;

alter table tickq.job_step_tries enable row level security;
alter table tickq.job_children enable row level security;
alter table tickq.job_step_tries force row level security;
alter table tickq.job_children force row level security;

create policy job_step_tries_owner on tickq.job_step_tries for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_step_tries_owner_clear on tickq.job_step_tries for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
create policy job_children_owner_clear on tickq.job_children for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = parent_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
create policy job_step_tries_worker on tickq.job_step_tries to tickq_worker
    using (true) with check (true);
create policy job_children_owner on tickq.job_children for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy job_children_worker on tickq.job_children to tickq_worker
    using (true) with check (true);

-- The owner of each new table keeps every row of it.
do $$
declare
    v_table text;
begin
    foreach v_table in array array['job_step_tries', 'job_children'] loop
        execute format('create policy %I on tickq.%I to %I using (true) with check (true)',
                       v_table || '_table_owner', v_table,
                       (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
                        where c.oid = ('tickq.' || v_table)::regclass));
    end loop;
end $$;

-- Settle the workflow side of jobs that just finished (job.map, job.call): the children of a
-- parent that ended dead or cancelled are cancelled with it (a running one is asked to
-- stop), transitively; a child that ended counts down its parent's unfinished children
-- (pending_parents on the suspended parent), releases the next waiting siblings so that at
-- most the step's max_running are runnable at once, and wakes the parent when the last one
-- ended. Called by tickq.jobs_settle, so only for finished jobs with has_children.
--
-- Children are released in their step's order: the runnable ones are always the first
-- max_running + ended of them, so the next to release follow from the count alone (no
-- scan of the siblings). The parent row is locked first, in id order, so children of one
-- parent finishing on several workers at once count down one after another.
create or replace function tickq.job_children_settle(p_ids uuid[], p_statuses text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_failed uuid[];
    v_ended uuid[];
    v_doomed uuid[];
    v_touched integer := 0;
    v_n integer;
begin
    select coalesce(array_agg(p.id) filter (where p.status in ('dead', 'cancelled')), '{}'),
           coalesce(array_agg(p.id), '{}')
    into v_failed, v_ended
    from unnest(p_ids, p_statuses) as p (id, status)
    where p.status in ('succeeded', 'dead', 'cancelled');

    if cardinality(v_failed) > 0 then
        update tickq.jobs c
        set cancel_requested = true, updated_at = p_at
        from tickq.job_children k
        where k.parent_id = any(v_failed) and c.id = k.child_id
          and c.status = 'running' and not c.cancel_requested;

        with gone as (
            update tickq.jobs c
            set status = 'cancelled',
                -- Named on the children that were waiting, as the dependency cascade names
                -- them (the only error an application's cancel may write).
                error = case when c.status = 'waiting'
                             then 'parent ' || k.parent_id || ' is ' || p.status
                             else c.error end,
                updated_at = p_at,
                finished_at = p_at
            from tickq.job_children k
            join unnest(p_ids, p_statuses) as p (id, status) on p.id = k.parent_id
            where k.parent_id = any(v_failed) and c.id = k.child_id
              and c.status in ('waiting', 'queued', 'retrying')
            returning c.id
        )
        select coalesce(array_agg(id), '{}') into v_doomed from gone;
        if cardinality(v_doomed) > 0 then
            v_touched := v_touched + cardinality(v_doomed) + tickq.jobs_settle(
                v_doomed, array_fill('cancelled'::text, array[cardinality(v_doomed)]), p_at);
        end if;
    end if;

    -- Only children of a parent waiting for their step count it down; the others stop
    -- here (a parent's cascade above among them, which an application may run: it may
    -- not write the columns below).
    if not exists (select from tickq.job_children k
                   join tickq.jobs p on p.id = k.parent_id
                   where k.child_id = any(v_ended)
                     and p.status in ('waiting', 'queued', 'running', 'retrying')
                     and p.wait_kind = 'children' and p.wait_name = k.step) then
        return v_touched;
    end if;

    perform from tickq.jobs p
    where p.id in (select k.parent_id from tickq.job_children k where k.child_id = any(v_ended))
      and p.status in ('waiting', 'queued', 'running', 'retrying')
    order by p.id
    for no key update;

    with ended as (
        select k.parent_id, k.step, k.max_running, k.siblings, count(*)::integer as n
        from tickq.job_children k
        where k.child_id = any(v_ended)
        group by k.parent_id, k.step, k.max_running, k.siblings
    ), counted as (
        update tickq.jobs p
        set pending_parents = greatest(p.pending_parents - e.n, 0),
            run_after = case when p.pending_parents - e.n <= 0 then least(p.run_after, p_at)
                             else p.run_after end,
            updated_at = p_at
        from ended e
        where p.id = e.parent_id and p.status in ('waiting', 'queued', 'running', 'retrying')
          and p.wait_kind = 'children' and p.wait_name = e.step
        returning p.id, e.step, e.max_running, e.siblings, p.pending_parents as left_after,
                  e.n
    ), released as (
        update tickq.jobs c
        set status = 'queued', updated_at = p_at
        from counted x
        join tickq.job_children k on k.parent_id = x.id and k.step = x.step
            and k.idx >= x.max_running + x.siblings - x.left_after - x.n
            and k.idx < x.max_running + x.siblings - x.left_after
        where c.id = k.child_id and c.status = 'waiting'
        returning c.id
    )
    select (select count(*) from counted) + (select count(*) from released) into v_n;
    return v_touched + v_n;
end $$;

-- Settle the children of jobs that just finished: release those whose last parent
-- succeeded, cancel every waiting descendant of a dead or cancelled one. Called by each
-- statement that finishes jobs (jobs_finish_and_claim, jobs_reclaim, jobs_cancel), in its
-- transaction, only for finished jobs with has_children.
--
-- VOLATILE on purpose: each statement below takes a fresh snapshot. A child enqueued while
-- its parent was finishing locked the parent first (jobs_parents_lock), so the finishing
-- statement waited for that enqueue to commit; its own snapshot predates the child, but
-- these statements see it. Either the enqueue saw the parent finished and did not count it,
-- or it counted it and is released here: never both, never neither.
create or replace function tickq.jobs_settle(parents uuid[], statuses text[], at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_settled integer;
begin
    -- Successes first, then failures by id: a descendant reached from several failed jobs
    -- at once is cancelled naming the least of them.
    v_settled := tickq.jobs_settle_run(
        array(select row(p.id, p.status, p.id, p.status, null::uuid, null::uuid,
                         at)::tickq.job_settlements
              from unnest(parents, statuses) as p (id, status)
              where p.status in ('succeeded', 'dead', 'cancelled')
              order by p.status <> 'succeeded', p.id),
        coalesce(nullif(current_setting('tickq.settle_budget', true), '')::integer, 1000),
        at);
    -- Jobs that are workflow children or parents (job.map, job.call) settle that side too.
    return v_settled + tickq.job_children_settle(parents, statuses, at);
end $$;

-- A deleted job takes its key, steps, step tries, signals, dependency edges and workflow
-- children with it, as foreign keys'
-- cascades would (a partitioned tickq.jobs cannot be referenced by id alone). A statement
-- trigger with the deleted rows (jobs_forget, triggers.sql): one set-based delete per table
-- and statement, and nothing at all for statements that delete no job. Security definer,
-- as a cascade: the rows go whoever deleted the job. Key rows are found by key (keyless
-- deleted jobs match none).
create or replace function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    delete from tickq.job_gates x using gone g where x.job_id = g.id;
    delete from tickq.job_step_tries t using gone g where t.job_id = g.id;
    -- A workflow's children go with their parent (this trigger fires again for them; a
    -- statement trigger fires even when it deletes nothing, hence the test first).
    if exists (select from tickq.job_children k join gone g on g.id = k.parent_id) then
        delete from tickq.jobs c
        where c.id in (select k.child_id from tickq.job_children k join gone g
                       on g.id = k.parent_id);
    end if;
    delete from tickq.job_children k using gone g
    where k.parent_id = g.id or k.child_id = g.id;
    return null;
end $$;

-- Emptying the jobs (tests, benchmarks, a reset) empties what hung on them, as TRUNCATE ...
-- CASCADE would through foreign keys. A delete, not a truncate: a TRUNCATE that names
-- these tables too is still using them here.
create or replace function tickq.jobs_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    delete from tickq.job_settlements;
    delete from tickq.job_gates;
    delete from tickq.job_step_tries;
    delete from tickq.job_children;
    return null;
end $$;

-- Drop one day partition whose every job retention lets go (queue_core/retention.py decides
-- which), with the idempotency keys, steps, signals and dependency edges of its jobs, in one
-- transaction. Returns what went, by queue, type and status, for the pruning report (a row
-- of nulls when it was empty); nothing, and the partition stays, when one of its jobs is a
-- parent that an unfinished child still needs (the child reads its result when it runs).
create or replace function tickq.jobs_partition_drop(p_name text)
    returns table (queue text, type text, status text, n bigint)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    set lock_timeout = '200ms'
    as $$
declare
    v_try    integer := 0;
    v_needed boolean;
begin
    if p_name !~ '^jobs_done_[0-9]{8}$' or to_regclass('tickq.' || p_name) is null then
        raise exception 'tickq: no day partition named %', p_name
            using errcode = 'invalid_parameter_value';
    end if;
    loop
        begin
            -- Nothing reads or writes the partition from here on: a child enqueued after a
            -- parent in it was checked would otherwise lose the parent's result.
            execute format('lock table tickq.%I in access exclusive mode', p_name);
            execute format(
                'select exists (select from tickq.%I j join tickq.job_dependencies d'
                ' on d.parent_id = j.id join tickq.jobs_live c on c.id = d.child_id'
                ' where j.has_children)', p_name) into strict v_needed;
            if v_needed then
                return;
            end if;
            -- One row per queue, type and status; one row of nulls for an empty partition.
            return query execute format(
                'select j.queue, j.type, j.status, count(*) from tickq.%I j'
                ' group by j.queue, j.type, j.status'
                ' union all select null, null, null, 0'
                ' where not exists (select from tickq.%I)', p_name, p_name);
            execute format('delete from tickq.job_keys k using tickq.%I j'
                           ' where k.idempotency_key = j.idempotency_key'
                           ' and k.user_id is not distinct from j.user_id'
                           ' and k.job_id = j.id', p_name);
            execute format('delete from tickq.job_steps s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_signals s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_dependencies d using tickq.%I j'
                           ' where d.child_id = j.id or d.parent_id = j.id', p_name);
            execute format('delete from tickq.job_gates x using tickq.%I j'
                           ' where x.job_id = j.id', p_name);
            execute format('delete from tickq.job_step_tries t using tickq.%I j'
                           ' where t.job_id = j.id', p_name);
            execute format('delete from tickq.job_children k using tickq.%I j'
                           ' where k.child_id = j.id or k.parent_id = j.id', p_name);
            execute format('drop table tickq.%I', p_name);
            return;
        exception when lock_not_available or deadlock_detected then
            v_try := v_try + 1;
            if v_try >= 20 then
                raise;
            end if;
            perform pg_sleep(0.05 * v_try);
        end;
    end loop;
end $$;
