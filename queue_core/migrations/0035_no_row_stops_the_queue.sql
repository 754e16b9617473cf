-- Rows inside every column bound that still stopped the queue for everyone.
--
-- A job whose attempts are used up (attempts = max_attempts) yet queued or retrying, as
-- plain SQL may leave it: every claim counted one attempt past max_attempts, which
-- jobs_attempts_check refused, failing the whole claim statement. tickq.jobs_lease, the
-- lease rule of every claim, now runs such a job as its last attempt.
--
-- An error history at its size bound (jobs_errors_check): the next failure, or the reclaim
-- of an expired lease, appended past it, and the check failed the statement for every job
-- it finished or reclaimed. tickq.error_history, which every statement that appends an
-- entry calls, now drops the oldest entries until the new one fits.
--
-- JSON nested deeper than a worker reads: Python's json module recurses once per array or
-- object and gives up near 1000 levels, so a payload nested that deep (2 kB, inside every
-- size bound) failed every claim that read it, and the reclaim once its lease expired. The
-- tables now bound the nesting of every JSON value a worker reads, for every role: at most
-- 64 arrays and objects (validation.MAX_JSON_DEPTH, which the API's validation refuses
-- past too). Rows that break it are brought inside first, as 0031_column_bounds did for
-- sizes: a live job whose input is nested too deep (its payload or result, a step's result,
-- a signal's payload) ends dead saying why, and the value is replaced: a payload by {} (a
-- schedule's with the schedule disabled), a result, progress, step result or signal
-- payload by null, an error history by one entry saying so.
--
-- A JSON number of more digits than Python reads as an integer (4300) is no bound: the
-- reading side takes it as a Decimal (queue_core/postgres/executor.py), since a check would
-- walk every number of a value on every update of its row.

-- Lease claimed jobs: the one lease rule of every claim (jobs_finish_and_claim and its
-- several-queue form in queries.sql, tickq.claim_limited, tickq.claim_fair), so the status,
-- the attempt count, the token, the lease's end and the start time are written here alone.
-- The caller has locked p_ids as queued or retrying (FOR UPDATE SKIP LOCKED); p_now is the
-- claim's instant, p_lease_seconds the lease of jobs that name none of their own.
--
-- A fresh token per claim: the first 16 bytes of sha256(this call's random seed, job id)
-- (tickq.lease_token).
-- As unguessable as a random uuid without the seed, and one random draw per call instead of
-- one per job (a build of PostgreSQL without OpenSSL opens /dev/urandom for each draw: a
-- tenth of a batch of 100). The worker draws the seed itself (p_seed, a random uuid per
-- claim statement) and keeps it while the statement is in flight: when the connection dies
-- before the reply arrives, the claim may have committed, and the seed finds those jobs
-- again on the next connection (jobs_claim_recover in queries.sql) instead of leaving
-- them to wait out their lease. Without one (SQL callers), the seed is drawn here.
--
-- The lookup by id names the live partition's statuses, so it reads tickq.jobs_live alone
-- (partition pruning needs a constant) instead of probing the id index of every day of
-- finished jobs; not ('queued', 'retrying'), which matches the predicate of jobs_claim_idx
-- and jobs_fair_idx: after a VACUUM the planner scanned a whole one for 100 ids. Every row
-- looked up is one the caller holds locked as queued or retrying, so it changes no result.
create or replace function tickq.jobs_lease(
    p_ids uuid[], p_lease_seconds integer, p_now timestamptz, p_seed uuid default null)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_seed uuid := coalesce(p_seed, gen_random_uuid());
begin
    return query
    update tickq.jobs j
    set status = 'running',
        -- A job whose attempts are used up yet waits to run (only plain SQL leaves one so)
        -- runs as its last attempt: counting one past max_attempts would break
        -- jobs_attempts_check and fail the claim of every job beside it.
        attempts = least(j.attempts + 1, j.max_attempts),
        lease_token = tickq.lease_token(v_seed, j.id),
        lease_until = p_now + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
        started_at = p_now,
        updated_at = p_now
    where j.id = any(p_ids) and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.*;
end $$;

-- The last 20 failures of a job, oldest first: enough to debug, bounded in size. The
-- history stays inside jobs_errors_check's bound (1 MiB, as stored) whatever it held: the
-- oldest entries go until the new one fits, so one long history (plain SQL may write one
-- at the bound) never fails the statement that appends, nor every job beside it there.
create or replace function tickq.error_history(history jsonb, entry jsonb) returns jsonb
    language plpgsql immutable parallel safe
    as $$
declare
    v_kept jsonb := history || jsonb_build_array(entry);
begin
    if jsonb_array_length(v_kept) > 20 then
        select jsonb_agg(e order by i) into v_kept
        from jsonb_array_elements(v_kept) with ordinality as a (e, i)
        where i > jsonb_array_length(v_kept) - 20;
    end if;
    -- A value just built is not compressed: its size is the one the check measures.
    while pg_column_size(v_kept) > 1048576 loop
        v_kept := v_kept - 0;
    end loop;
    return v_kept;
end $$;

lock table tickq.jobs, tickq.job_steps, tickq.job_signals, tickq.schedules
    in access exclusive mode;

-- Each statement below reads the bound's jsonpath from p.deep: an array or object 64 levels
-- below the top, the 65th nested.
with p as (
    select 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'::jsonpath as deep
), doomed as (
    select j.id,
           'tickq: ' || case
               when jsonb_path_exists(j.payload, p.deep) then 'its payload'
               when jsonb_path_exists(j.result, p.deep) then 'its result'
               when exists (select from tickq.job_steps s
                            where s.job_id = j.id and jsonb_path_exists(s.result, p.deep))
                   then 'a step''s result'
               else 'a signal''s payload'
           end || ' was nested deeper than the engine reads; removed by migration '
               || '0035_no_row_stops_the_queue' as reason
    from tickq.jobs j, p
    where j.status in ('waiting', 'queued', 'running', 'retrying')
      and (jsonb_path_exists(j.payload, p.deep)
           or jsonb_path_exists(j.result, p.deep)
           or exists (select from tickq.job_steps s
                      where s.job_id = j.id and jsonb_path_exists(s.result, p.deep))
           or exists (select from tickq.job_signals g
                      where g.job_id = j.id and jsonb_path_exists(g.payload, p.deep)))
), dead as (
    update tickq.jobs j
    set status = 'dead',
        error = d.reason,
        errors = tickq.error_history(j.errors, jsonb_build_object(
            'attempt', j.attempts, 'at', now(), 'error', d.reason)),
        lease_until = null,
        lease_token = null,
        cancel_requested = false,
        updated_at = now(),
        finished_at = now()
    from doomed d
    where j.id = d.id
    returning j.id, j.status, j.has_children
)
select tickq.jobs_settle(array_agg(id), array_agg(status), now())
from dead
where has_children
having count(*) > 0;

update tickq.jobs j
set payload = case when jsonb_path_exists(j.payload, p.deep) then '{}'::jsonb
                   else j.payload end,
    progress = case when jsonb_path_exists(j.progress, p.deep) then null else j.progress end,
    result = case when jsonb_path_exists(j.result, p.deep) then null else j.result end,
    errors = case when jsonb_path_exists(j.errors, p.deep)
                  then jsonb_build_array(jsonb_build_object(
                      'attempt', j.attempts, 'at', now(),
                      'error', 'tickq: the error history was nested deeper than the engine'
                               || ' reads; removed by migration 0035_no_row_stops_the_queue'))
                  else j.errors end
from (select 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'::jsonpath as deep) p
where jsonb_path_exists(j.payload, p.deep)
   or jsonb_path_exists(j.progress, p.deep)
   or jsonb_path_exists(j.result, p.deep)
   or jsonb_path_exists(j.errors, p.deep);

update tickq.job_steps s set result = null
from (select 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'::jsonpath as deep) p
where jsonb_path_exists(s.result, p.deep);

update tickq.job_signals g set payload = null
from (select 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'::jsonpath as deep) p
where jsonb_path_exists(g.payload, p.deep);

-- A schedule whose jobs would break the bound stops firing until an operator looks at it.
update tickq.schedules s set enabled = false, payload = '{}'::jsonb
from (select 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'::jsonpath as deep) p
where jsonb_path_exists(s.payload, p.deep);

alter table tickq.jobs
    add constraint jobs_json_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            progress, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            result, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            errors, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'));

alter table tickq.job_steps
    add constraint job_steps_result_depth_check check (
        not jsonb_path_exists(
            result, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'));

alter table tickq.job_signals
    add constraint job_signals_payload_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'));

alter table tickq.schedules
    add constraint schedules_payload_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'));
