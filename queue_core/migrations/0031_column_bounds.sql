-- Column bounds: no row can hold what the engine cannot read, whoever writes it. Until now
-- only the API bounded what it let in, and a row written by plain SQL (the application
-- role, a worker, the owner) could stop the queue for everyone: a backoff of 1e300 seconds
-- failed every later reclaim with `interval out of range`, a lease of 2^31 seconds held a
-- running slot for decades, a `-infinity` time broke the claim and every listing, a 100 MB
-- payload blew a worker's memory. CHECK constraints hold the bounds of queue_core/bounds.py
-- for every role, the owner included; each is at least what the API accepts.
--
-- Rows that break a bound are brought inside it first, so the constraints can be added:
-- * A live job whose input is over its size bound (its payload or result, a step's result,
--   a signal's payload) cannot run as it was: it ends dead, saying why (its `Job Dead`
--   event, its key freed and its waiting descendants cancelled as on any path to dead),
--   and the value is replaced below. It does not run its undos (its handler would replay
--   without the input it needs).
-- * A number is clamped into its bound; a time outside the years 1-9999 becomes the nearest
--   bound when it orders the claim (run_after, wait_until: `-infinity` still runs first,
--   `infinity` still waits), else now (a lease expires now and is reclaimed; a record time
--   says when this migration found it), but a schedule's next occurrence too late becomes
--   the last bound (it still never fires); a name or error text over its length is cut; an
--   idempotency key over its length is dropped with its key row (no enqueue could present
--   it); a signal, step or try whose name is over its length is deleted (no handler could
--   name it); an oversized payload becomes {} (a schedule's with the schedule disabled), an
--   oversized result, progress or signal payload null, an oversized error history one
--   entry saying so.
--
-- ALTER TABLE on tickq.jobs recurses into every partition (jobs_live, jobs_done, its default
-- and its day partitions); day partitions made later copy the constraints (CREATE TABLE
-- ... LIKE tickq.jobs INCLUDING CONSTRAINTS, tickq.jobs_partitions_ensure) and attach.
--
-- The tables are locked first, as the ALTERs below would lock them: no row written between
-- the repairs and the constraints can break one, and no statement of a worker waits for a
-- row this transaction changed while this transaction waits for that worker's lock.
lock table tickq.jobs, tickq.job_steps, tickq.job_signals, tickq.job_step_tries,
    tickq.job_children, tickq.job_gates, tickq.schedules, tickq.type_limits,
    tickq.retention_policies, tickq.queue_pauses, tickq.outbox in access exclusive mode;

with doomed as (
    select j.id,
           'tickq: ' || case
               when pg_column_size(case when pg_column_compression(j.payload) is null
                                        then j.payload else j.payload #> '{}' end) > 2097152
                   then 'its payload'
               when pg_column_size(case when pg_column_compression(j.result) is null
                                        then j.result else j.result #> '{}' end) > 8388608
                   then 'its result'
               when exists (select from tickq.job_steps s
                            where s.job_id = j.id
                              and pg_column_size(case when pg_column_compression(s.result)
                                                          is null
                                                      then s.result
                                                      else s.result #> '{}' end) > 2097152)
                   then 'a step''s result'
               else 'a signal''s payload'
           end || ' was over the size the engine reads; removed by migration '
               || '0031_column_bounds' as reason
    from tickq.jobs j
    where j.status in ('waiting', 'queued', 'running', 'retrying')
      and (pg_column_size(case when pg_column_compression(j.payload) is null
                               then j.payload else j.payload #> '{}' end) > 2097152
           or pg_column_size(case when pg_column_compression(j.result) is null
                                  then j.result else j.result #> '{}' end) > 8388608
           or exists (select from tickq.job_steps s
                      where s.job_id = j.id
                        and pg_column_size(case when pg_column_compression(s.result) is null
                                                then s.result
                                                else s.result #> '{}' end) > 2097152)
           or exists (select from tickq.job_signals g
                      where g.job_id = j.id
                        and pg_column_size(case when pg_column_compression(g.payload) is null
                                                then g.payload
                                                else g.payload #> '{}' end) > 524288))
), dead as (
    update tickq.jobs j
    set status = 'dead',
        error = d.reason,
        errors = case when jsonb_typeof(j.errors) = 'array'
                      then tickq.error_history(j.errors, jsonb_build_object(
                          'attempt', j.attempts, 'at', now(), 'error', d.reason))
                      else jsonb_build_array(jsonb_build_object(
                          'attempt', j.attempts, 'at', now(), 'error', d.reason)) end,
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

-- A key no enqueue accepts (over 255 characters) goes, with the row that holds it.
delete from tickq.job_keys k
using tickq.jobs j
where char_length(j.idempotency_key) > 255
  and k.job_id = j.id and k.idempotency_key = j.idempotency_key
  and k.user_id is not distinct from j.user_id;

update tickq.jobs j
set max_attempts = case when j.max_attempts > 1000000000 then 1000000000
                        else j.max_attempts end,
    attempts = case when j.attempts > 1000000000 then 1000000000 else j.attempts end,
    lease_seconds = case when j.lease_seconds > 43200 then 43200 else j.lease_seconds end,
    -- NaN sorts above every number: least() and `>` take it as too large.
    backoff_base = least(j.backoff_base, 86400),
    backoff_factor = least(j.backoff_factor, 100),
    backoff_max = least(greatest(j.backoff_max, least(j.backoff_base, 86400)), 604800),
    resumes = case when j.resumes < 0 then 0 else j.resumes end,
    run_after = case when j.run_after < '0001-01-02 00:00:00+00' then '0001-01-02 00:00:00+00'
                     when j.run_after > '9999-12-30 00:00:00+00' then '9999-12-30 00:00:00+00'
                     else j.run_after end,
    wait_until = case when j.wait_until < '0001-01-02 00:00:00+00'
                          then '0001-01-02 00:00:00+00'
                      when j.wait_until > '9999-12-30 00:00:00+00'
                          then '9999-12-30 00:00:00+00'
                      else j.wait_until end,
    lease_until = case when j.lease_until not between '0001-01-02 00:00:00+00'
                                              and '9999-12-30 00:00:00+00'
                       then now() else j.lease_until end,
    created_at = case when j.created_at not between '0001-01-02 00:00:00+00'
                                             and '9999-12-30 00:00:00+00'
                      then now() else j.created_at end,
    updated_at = case when j.updated_at not between '0001-01-02 00:00:00+00'
                                             and '9999-12-30 00:00:00+00'
                      then now() else j.updated_at end,
    started_at = case when j.started_at not between '0001-01-02 00:00:00+00'
                                             and '9999-12-30 00:00:00+00'
                      then now() else j.started_at end,
    finished_at = case when j.finished_at not between '0001-01-02 00:00:00+00'
                                               and '9999-12-30 00:00:00+00'
                       then now() else j.finished_at end,
    type = left(j.type, 128),
    queue = left(j.queue, 128),
    wait_name = left(j.wait_name, 128),
    idempotency_key = case when char_length(j.idempotency_key) > 255 then null
                           else j.idempotency_key end,
    error = case when octet_length(j.error) > 16000 then left(j.error, 3997) || '...'
                 else j.error end,
    -- The first 100 names a handler could have sent (at most 128 characters each).
    signals = case when cardinality(j.signals) > 100
                        or octet_length(array_to_string(j.signals, '')) > 51200
                   then array(select u.s from unnest(j.signals) with ordinality as u (s, i)
                              where char_length(u.s) <= 128 order by u.i limit 100)
                   else j.signals end,
    payload = case when pg_column_size(case when pg_column_compression(j.payload) is null
                                            then j.payload else j.payload #> '{}' end)
                        > 2097152
                   then '{}'::jsonb else j.payload end,
    result = case when pg_column_size(case when pg_column_compression(j.result) is null
                                           then j.result else j.result #> '{}' end)
                       > 8388608
                  then null else j.result end,
    progress = case when pg_column_size(case when pg_column_compression(j.progress) is null
                                             then j.progress else j.progress #> '{}' end)
                         > 2097152
                    then null else j.progress end,
    errors = case when jsonb_typeof(j.errors) <> 'array'
                       or pg_column_size(case when pg_column_compression(j.errors) is null
                                              then j.errors else j.errors #> '{}' end)
                          > 1048576
                  then jsonb_build_array(jsonb_build_object(
                      'attempt', j.attempts, 'at', now(),
                      'error', 'tickq: the error history was not an array of the size the'
                               || ' engine reads; removed by migration 0031_column_bounds'))
                  else j.errors end
where j.max_attempts > 1000000000
   or j.lease_seconds > 43200
   or j.backoff_base > 86400
   or j.backoff_factor > 100
   or j.backoff_max > 604800
   or j.resumes < 0
   or j.run_after not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.lease_until not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.created_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.updated_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.started_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.finished_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or j.wait_until not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or char_length(j.type) > 128
   or char_length(j.queue) > 128
   or char_length(j.wait_name) > 128
   or char_length(j.idempotency_key) > 255
   or octet_length(j.error) > 16000
   or cardinality(j.signals) > 100
   or octet_length(array_to_string(j.signals, '')) > 51200
   or pg_column_size(case when pg_column_compression(j.payload) is null
                          then j.payload else j.payload #> '{}' end) > 2097152
   or pg_column_size(case when pg_column_compression(j.result) is null
                          then j.result else j.result #> '{}' end) > 8388608
   or pg_column_size(case when pg_column_compression(j.progress) is null
                          then j.progress else j.progress #> '{}' end) > 2097152
   or jsonb_typeof(j.errors) <> 'array'
   or pg_column_size(case when pg_column_compression(j.errors) is null
                          then j.errors else j.errors #> '{}' end) > 1048576;

delete from tickq.job_steps where char_length(name) > 128;
update tickq.job_steps
set result = case when pg_column_size(case when pg_column_compression(result) is null
                                           then result else result #> '{}' end) > 2097152
                  then null else result end,
    size = case when size < 0 then 0 when size > 262144 then 262144 else size end,
    finished_at = case when finished_at not between '0001-01-02 00:00:00+00'
                                            and '9999-12-30 00:00:00+00'
                       then now() else finished_at end
where pg_column_size(case when pg_column_compression(result) is null
                          then result else result #> '{}' end) > 2097152
   or size not between 0 and 262144
   or finished_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

delete from tickq.job_signals where char_length(name) > 128;
update tickq.job_signals
set payload = case when pg_column_size(case when pg_column_compression(payload) is null
                                            then payload else payload #> '{}' end) > 524288
                   then null else payload end,
    size = case when size < 0 then 0 when size > 65536 then 65536 else size end,
    sent_at = case when sent_at not between '0001-01-02 00:00:00+00'
                                    and '9999-12-30 00:00:00+00'
                   then now() else sent_at end
where pg_column_size(case when pg_column_compression(payload) is null
                          then payload else payload #> '{}' end) > 524288
   or size not between 0 and 65536
   or sent_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

delete from tickq.job_step_tries where char_length(name) > 128;
update tickq.job_step_tries
set error = case when octet_length(error) > 16000 then left(error, 3997) || '...'
                 else error end,
    at = case when at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
              then now() else at end,
    done_at = case when done_at not between '0001-01-02 00:00:00+00'
                                    and '9999-12-30 00:00:00+00'
                   then now() else done_at end
where octet_length(error) > 16000
   or at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or done_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

-- Cut, not deleted: the parent's wait names the step (its wait_name is cut alike).
update tickq.job_children set step = left(step, 128) where char_length(step) > 128;

update tickq.job_gates
set gate_key = left(gate_key, 255),
    first_at = case when first_at not between '0001-01-02 00:00:00+00'
                                      and '9999-12-30 00:00:00+00'
                    then now() else first_at end
where char_length(gate_key) > 255
   or first_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

update tickq.outbox
set last_error = case when octet_length(last_error) > 16000
                      then left(last_error, 3997) || '...' else last_error end,
    created_at = case when created_at not between '0001-01-02 00:00:00+00'
                                          and '9999-12-30 00:00:00+00'
                      then now() else created_at end,
    published_at = case when published_at not between '0001-01-02 00:00:00+00'
                                              and '9999-12-30 00:00:00+00'
                        then now() else published_at end
where octet_length(last_error) > 16000
   or created_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or published_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

-- A schedule whose jobs would break a bound stops firing until an operator looks at it.
update tickq.schedules
set enabled = enabled
        and pg_column_size(case when pg_column_compression(payload) is null
                                then payload else payload #> '{}' end) <= 2097152
        and char_length(type) <= 128 and char_length(queue) <= 128
        and coalesce(char_length(group_key) <= 128, true),
    payload = case when pg_column_size(case when pg_column_compression(payload) is null
                                            then payload else payload #> '{}' end)
                        > 2097152
                   then '{}'::jsonb else payload end,
    type = left(type, 128),
    queue = left(queue, 128),
    group_key = left(group_key, 128),
    max_attempts = case when max_attempts > 1000000000 then 1000000000 else max_attempts end,
    last_fired = case when last_fired not between '0001-01-02 00:00:00+00'
                                          and '9999-12-30 00:00:00+00'
                      then null else last_fired end,
    next_at = case when next_at < '0001-01-02 00:00:00+00' then now()
                   when next_at > '9999-12-30 00:00:00+00' then '9999-12-30 00:00:00+00'
                   else next_at end,
    created_at = case when created_at not between '0001-01-02 00:00:00+00'
                                          and '9999-12-30 00:00:00+00'
                      then now() else created_at end,
    updated_at = case when updated_at not between '0001-01-02 00:00:00+00'
                                          and '9999-12-30 00:00:00+00'
                      then now() else updated_at end
where pg_column_size(case when pg_column_compression(payload) is null
                          then payload else payload #> '{}' end) > 2097152
   or char_length(type) > 128
   or char_length(queue) > 128
   or char_length(group_key) > 128
   or max_attempts > 1000000000
   or last_fired not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or next_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or created_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
   or updated_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

update tickq.type_limits
set rate_limit = case when rate_limit > 10000 then 10000 else rate_limit end,
    rate_period_seconds = case when rate_period_seconds > 86400 then 86400
                               else rate_period_seconds end
where rate_limit > 10000 or rate_period_seconds > 86400;

update tickq.retention_policies
set max_age_seconds = 3153600000
where max_age_seconds > 3153600000;

update tickq.queue_pauses
set paused_by = left(paused_by, 200),
    paused_at = case when paused_at not between '0001-01-02 00:00:00+00'
                                       and '9999-12-30 00:00:00+00'
                     then now() else paused_at end
where char_length(paused_by) > 200
   or paused_at not between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00';

-- The constraints, each table's in one statement (one scan of its rows).
alter table tickq.jobs
    drop constraint jobs_max_attempts_check,
    drop constraint jobs_lease_seconds_check,
    drop constraint jobs_backoff_check,
    add constraint jobs_max_attempts_check check (
        max_attempts >= 1 and max_attempts <= 1000000000),
    add constraint jobs_lease_seconds_check check (
        lease_seconds is null or lease_seconds between 1 and 43200),
    add constraint jobs_backoff_check check (
        backoff_base > 0 and backoff_base <= 86400
        and backoff_factor >= 1 and backoff_factor <= 100
        and backoff_max >= backoff_base and backoff_max <= 604800
        and backoff_jitter between 0 and 1),
    add constraint jobs_resumes_check check (resumes >= 0),
    add constraint jobs_times_check check (
        run_after between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and lease_until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and updated_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and started_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and finished_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and wait_until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'),
    add constraint jobs_names_check check (
        char_length(type) <= 128 and char_length(queue) <= 128
        and char_length(idempotency_key) <= 255 and char_length(wait_name) <= 128),
    add constraint jobs_error_check check (octet_length(error) <= 16000),
    add constraint jobs_signals_check check (
        cardinality(signals) <= 100 and octet_length(array_to_string(signals, '')) <= 51200),
    add constraint jobs_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 2097152),
    add constraint jobs_result_size_check check (
        pg_column_size(case when pg_column_compression(result) is null then result
                            else result #> '{}' end) <= 8388608),
    add constraint jobs_progress_size_check check (
        pg_column_size(case when pg_column_compression(progress) is null then progress
                            else progress #> '{}' end) <= 2097152),
    add constraint jobs_errors_check check (
        jsonb_typeof(errors) = 'array'
        and pg_column_size(case when pg_column_compression(errors) is null then errors
                                else errors #> '{}' end) <= 1048576);

alter table tickq.job_gates
    add constraint job_gates_key_check check (char_length(gate_key) <= 255),
    add constraint job_gates_first_at_check check (
        first_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.job_steps
    drop constraint job_steps_name_check,
    add constraint job_steps_name_check check (name <> '' and char_length(name) <= 128),
    add constraint job_steps_result_size_check check (
        pg_column_size(case when pg_column_compression(result) is null then result
                            else result #> '{}' end) <= 2097152),
    add constraint job_steps_size_check check (size between 0 and 262144),
    add constraint job_steps_finished_at_check check (
        finished_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.job_signals
    drop constraint job_signals_name_check,
    add constraint job_signals_name_check check (name <> '' and char_length(name) <= 128),
    add constraint job_signals_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 524288),
    add constraint job_signals_size_check check (size between 0 and 65536),
    add constraint job_signals_sent_at_check check (
        sent_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.job_step_tries
    add constraint job_step_tries_name_check check (char_length(name) <= 128),
    add constraint job_step_tries_error_check check (octet_length(error) <= 16000),
    add constraint job_step_tries_times_check check (
        at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and done_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.job_children
    add constraint job_children_step_check check (char_length(step) <= 128);

alter table tickq.schedules
    drop constraint schedules_max_attempts_check,
    add constraint schedules_max_attempts_check check (
        max_attempts >= 1 and max_attempts <= 1000000000),
    add constraint schedules_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 2097152),
    add constraint schedules_names_check check (
        char_length(type) <= 128 and char_length(queue) <= 128
        and char_length(group_key) <= 128),
    add constraint schedules_times_check check (
        last_fired between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and next_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and updated_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.type_limits
    drop constraint type_limits_rate_check,
    add constraint type_limits_rate_check check (
        (rate_limit is null) = (rate_period_seconds is null)
        and (rate_limit is null or rate_limit between 1 and 10000)
        and (rate_period_seconds is null
             or (rate_period_seconds > 0 and rate_period_seconds <= 86400)));

alter table tickq.retention_policies
    drop constraint retention_policies_max_age_check,
    add constraint retention_policies_max_age_check check (
        max_age_seconds is null or max_age_seconds between 0 and 3153600000);

alter table tickq.queue_pauses
    add constraint queue_pauses_paused_by_check check (char_length(paused_by) <= 200),
    add constraint queue_pauses_paused_at_check check (
        paused_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');

alter table tickq.outbox
    add constraint outbox_last_error_check check (octet_length(last_error) <= 16000),
    add constraint outbox_times_check check (
        created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and published_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00');
