-- A saga's undos run when it ends dead or cancelled away from its handler too: cancelled
-- while not running (queued, retrying, suspended on a sleep, a signal or its children; by
-- jobs_cancel, tickq.operator_cancel, or as the workflow child of a parent that ended dead
-- or cancelled) and dead or cancelled through the reclaim (its worker died on its last
-- attempt, or after a cancel was asked). The database cannot run an undo: such a job has
-- its compensation recorded and is made runnable at once with attempts for its undos, and
-- its handler, replayed, runs the undos not yet recorded and then ends it as it was to end.
-- A step stored with an undo is marked compensable, so this costs nothing to jobs that
-- use no undo. Adding a column with a constant default rewrites no row.

alter table tickq.job_steps add column compensable boolean not null default false;

-- The attempts a job that is to end dead or cancelled away from its handler (the reclaim, a
-- cancel while it does not run) must be left so that its undos run first: 0 when none of
-- its stored steps has an undo (it ends as any job), its compensable steps x 5 + 1 (5: the
-- tries of one undo, UNDO_TRIES in queue_core/steps.py) when it owes them, and null when
-- its compensation has begun already (it is not begun twice). Callers test the job row
-- first (a claimed or resumed job), so a job that never stored a step reads no other table.
create function tickq.job_compensation_spare(p_id uuid) returns integer
    language sql stable
    as $$
    select case when exists (select from tickq.job_step_tries t
                             where t.job_id = p_id and t.kind = 'compensation')
                then null
                else coalesce(nullif((select count(*)::integer from tickq.job_steps s
                                      where s.job_id = p_id and s.compensable), 0) * 5 + 1, 0)
           end
$$;

-- The workflow children (job.map, job.call) of jobs that ended dead or cancelled, or that
-- began compensating to end so, go with them, transitively: a running child is asked to
-- stop; one not running is cancelled, but for a saga with completed undoable steps
-- (tickq.job_compensation_spare), which begins its compensation instead (recorded, runnable
-- at once with attempts for its undos: its handler runs them, then it ends cancelled), and
-- one compensating already, which is left to finish. Called by tickq.job_children_settle
-- and by the cancels that begin a parent's compensation. Returns the children it touched.
create function tickq.job_children_cancel(p_ids uuid[], p_statuses text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_failed uuid[];
    v_doomed uuid[];
    v_owing uuid[];
    v_touched integer := 0;
begin
    select coalesce(array_agg(p.id), '{}') into v_failed
    from unnest(p_ids, p_statuses) as p (id, status)
    where p.status in ('dead', 'cancelled');
    if cardinality(v_failed) = 0 then
        return 0;
    end if;

    update tickq.jobs c
    set cancel_requested = true, updated_at = p_at
    from tickq.job_children k
    where k.parent_id = any(v_failed) and c.id = k.child_id
      and c.status = 'running' and not c.cancel_requested;

    with owed as materialized (
        select c.id, k.parent_id, p.status as parent_status,
               -- Only a child that ran (claimed, or resumed) may have stored a step.
               case when c.status in ('queued', 'retrying')
                         and (c.attempts > 0 or c.resumes is not null)
                    then tickq.job_compensation_spare(c.id) else 0 end as spare
        from tickq.job_children k
        join unnest(p_ids, p_statuses) as p (id, status) on p.id = k.parent_id
        join tickq.jobs c on c.id = k.child_id
        where k.parent_id = any(v_failed) and c.status in ('waiting', 'queued', 'retrying')
    ), gone as (
        update tickq.jobs c
        set status = case when o.spare = 0 then 'cancelled' else c.status end,
            -- Named on the children that were waiting, as the dependency cascade names
            -- them (the only error an application's cancel may write).
            error = case when o.spare = 0 and c.status = 'waiting'
                         then 'parent ' || o.parent_id || ' is ' || o.parent_status
                         else c.error end,
            run_after = case when o.spare > 0 then least(c.run_after, p_at) else c.run_after end,
            max_attempts = case when o.spare > 0
                                then greatest(c.max_attempts, c.attempts + o.spare)
                                else c.max_attempts end,
            updated_at = p_at,
            finished_at = case when o.spare = 0 then p_at else c.finished_at end
        from owed o
        where c.id = o.id and o.spare is not null
          and c.status in ('waiting', 'queued', 'retrying')
        returning c.id, o.spare, o.parent_id, o.parent_status, c.has_children
    ), begun as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select g.id, 'compensation', 'cancelled', 0,
               'parent ' || g.parent_id || ' is ' || g.parent_status, p_at
        from gone g
        where g.spare > 0
        on conflict (job_id, kind, name) do nothing
    )
    select coalesce(array_agg(id) filter (where spare = 0), '{}'),
           coalesce(array_agg(id) filter (where spare > 0 and has_children), '{}')
    into v_doomed, v_owing
    from gone;
    if cardinality(v_doomed) > 0 then
        v_touched := v_touched + cardinality(v_doomed) + tickq.jobs_settle(
            v_doomed, array_fill('cancelled'::text, array[cardinality(v_doomed)]), p_at);
    end if;
    if cardinality(v_owing) > 0 then
        v_touched := v_touched + cardinality(v_owing) + tickq.job_children_cancel(
            v_owing, array_fill('cancelled'::text, array[cardinality(v_owing)]), p_at);
    end if;
    return v_touched;
end $$;

-- Settle the workflow side of jobs that just finished (job.map, job.call): the children of a
-- parent that ended dead or cancelled are cancelled with it (tickq.job_children_cancel: a
-- running one is asked to stop, a saga compensates first), transitively; a child that
-- ended counts down its parent's unfinished children (pending_parents on the suspended
-- parent), releases the next waiting siblings so that at most the step's max_running are
-- runnable at once, and wakes the parent when the last one ended. Called by tickq.jobs_settle, so only for finished jobs with has_children.
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
    v_touched integer := 0;
    v_n integer;
begin
    select coalesce(array_agg(p.id) filter (where p.status in ('dead', 'cancelled')), '{}'),
           coalesce(array_agg(p.id), '{}')
    into v_failed, v_ended
    from unnest(p_ids, p_statuses) as p (id, status)
    where p.status in ('succeeded', 'dead', 'cancelled');

    if cardinality(v_failed) > 0 then
        v_touched := tickq.job_children_cancel(p_ids, p_statuses, p_at);
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

-- Cancel jobs of any user, as jobs_cancel does: jobs not yet running at once (with their
-- waiting descendants, tickq.jobs_settle), running ones asked to stop at their next
-- heartbeat, and a saga not running that owes undos (tickq.job_compensation_spare) made to
-- compensate first (its compensation recorded, runnable at once with attempts for its
-- undos, its workflow children cancelled now; its handler runs the undos, then it ends
-- cancelled); one compensating already is left to finish. Per requested id what happened.
create or replace function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), owed as materialized (
    -- Only a job that ran (claimed, or resumed) may have stored a step.
    select j.id,
           case when j.status in ('queued', 'retrying')
                     and (j.attempts > 0 or j.resumes is not null)
                then tickq.job_compensation_spare(j.id) else 0 end as spare
    from tickq.jobs j
    where j.id in (select r.id from requested r)
      and j.status in ('waiting', 'queued', 'retrying', 'running')
    -- Locked, so these columns are the row's latest: a job that suspended after this
    -- statement began is seen at rest, and compensates instead of ending without undos.
    for update of j
), cancelled as (
    update tickq.jobs j
    set status = case when j.status = 'running' or o.spare is distinct from 0 then j.status
                      else 'cancelled' end,
        cancel_requested = (j.status = 'running'),
        run_after = case when j.status <> 'running' and o.spare > 0
                         then least(j.run_after, coalesce(p_now, now())) else j.run_after end,
        max_attempts = case when j.status <> 'running' and o.spare > 0
                            then greatest(j.max_attempts, j.attempts + o.spare)
                            else j.max_attempts end,
        finished_at = case when j.status = 'running' or o.spare is distinct from 0 then null
                           else coalesce(p_now, now()) end,
        updated_at = coalesce(p_now, now())
    from owed o
    where j.id = o.id and j.status in ('waiting', 'queued', 'retrying', 'running')
    returning j.id, j.status, j.cancel_requested, j.has_children,
              j.status <> 'cancelled' and not j.cancel_requested as compensating,
              j.status <> 'cancelled' and not j.cancel_requested and o.spare > 0 as begun
), begun as (
    insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
    select c.id, 'compensation', 'cancelled', 0, 'cancelled', coalesce(p_now, now())
    from cancelled c
    where c.begun
    on conflict (job_id, kind, name) do nothing
), settled as (
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(c.id), array_agg(c.status),
                                       coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.status = 'cancelled'
), compensating as (
    -- The workflow children of a parent that begins compensating are cancelled now.
    select case when count(*) > 0
                then tickq.job_children_cancel(
                    array_agg(c.id), array_fill('cancelled'::text, array[count(*)::integer]),
                    coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.begun
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.compensating then 'compensating'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
cross join settled
cross join compensating
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- Applications may change a job only through the documented operations
-- (docs/threat-model.md), each one a set of columns it may move and how: debounce a job of
-- a debounce's key that has not started (tickq.job_gate), cancel a job not yet running (a waiting one with an error naming the failed ancestor when the cascade of
-- tickq.jobs_settle does it; a saga that owes undos compensates first), ask a running job
-- to cancel, send a dead or cancelled job back
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
    -- Cancel a saga not running that owes undos: it stays as it is, but runnable at once
    -- with the attempts its compensation needs (tickq.job_compensation_spare, read before
    -- the compensation's row is written in the same statement), or, compensating already,
    -- untouched but for the time.
    if (v_moved <@ array['run_after', 'max_attempts', 'updated_at']
        and new.status = old.status and old.status in ('queued', 'retrying')
        and not new.cancel_requested
        and case when v_moved <@ array['updated_at']
                 then tickq.job_compensation_spare(old.id) is null
                 else tickq.job_compensation_spare(old.id) > 0
                      and new.run_after <= old.run_after
                      and new.max_attempts = greatest(
                          old.max_attempts, old.attempts + tickq.job_compensation_spare(old.id))
            end) is true then
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
    -- Debounce: a queued job a debounce made, not started yet, takes a new payload (a JSON
    -- object) and run time.
    if (v_moved <@ array['payload', 'run_after', 'updated_at']
        and old.status = 'queued' and old.started_at is null
        and jsonb_typeof(new.payload) = 'object'
        and exists (select from tickq.job_gates g
                    where g.job_id = old.id and g.kind = 'debounce')) is true then
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

-- Record the compensation of jobs the reclaim sent back to run their undos (the status each
-- ends in, the error that ended it), keeping one begun already. A function, called only
-- when there is one: an insert in the reclaim's own statement would open job_step_tries
-- and its index on every tick, for the nearly always empty set.
create function tickq.job_compensations_record(
    p_ids uuid[], p_ends text[], p_errors text[], p_at timestamptz
) returns integer
    language sql volatile
    as $$
    with kept as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select c.id, 'compensation', c.ends, 0, c.error, p_at
        from unnest(p_ids, p_ends, p_errors) as c (id, ends, error)
        on conflict (job_id, kind, name) do nothing
        returning job_id
    )
    select count(*)::integer from kept
$$;

-- A cancel of an application's own saga that is not running records its compensation
-- (jobs_cancel, tickq.job_children_cancel): that row alone, on a job that owes undos.
grant insert on tickq.job_step_tries to tickq_app;
-- The attempts its undos need (tickq.jobs_app_guard allows no other change of them).
grant update (max_attempts) on tickq.jobs to tickq_app;
create policy job_step_tries_owner_compensation on tickq.job_step_tries for insert
    to tickq_app
    with check (kind = 'compensation' and name = 'cancelled' and tries = 0
                and done_at is null
                and (error = 'cancelled' or error ~ '^parent [0-9a-f-]{36} is (dead|cancelled)$')
                and exists (select from tickq.jobs j
                            where j.id = job_id and j.user_id = tickq.current_user_id()
                              and j.status in ('queued', 'retrying')));
