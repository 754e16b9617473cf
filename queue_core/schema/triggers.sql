-- The triggers on tickq.jobs, after its functions (functions/). Row triggers on the
-- partitioned table are cloned onto every partition, the day partitions made later too.

-- Wake long-running workers when jobs arrive: one notification per insert statement, not
-- per row (tickq.notify_jobs_enqueued).
create trigger jobs_notify_enqueued
    after insert on tickq.jobs
    for each statement
    execute function tickq.notify_jobs_enqueued();

-- Applications may change a job only through the documented operations
-- (tickq.jobs_app_guard). The condition is only the gate, an application user's
-- transaction: workers never set tickq.user_id and so pay nothing, and PostgreSQL compiles
-- a row trigger's condition for every statement that updates the table, so it stays this
-- one comparison (the guard function decides everything else).
create trigger jobs_app_guard before update on tickq.jobs
    for each row when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_guard();

-- An application user's job competes as its owner's (tickq.jobs_app_own): its priority
-- orders only the owner's jobs, its group is one of the owner's. The same gate as below.
create trigger jobs_app_own before insert on tickq.jobs
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_own();

-- Admission for application users' inserts (tickq.jobs_app_admit). Only their rows: a
-- worker's insert evaluates the condition and queues nothing, and keeps its explicit
-- admission (tickq.queue_admit). A row trigger, not a statement one with a transition
-- table, which would copy every inserted row of every enqueue.
create trigger jobs_app_admit after insert on tickq.jobs
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_admit();

-- A keyed job that becomes dead or cancelled, by any path (finish, reclaim, cancel,
-- dependency settlement, the operator functions), lets its key go in the same statement.
-- BEFORE row triggers, since they still fire when the update moves the row to another
-- partition (an AFTER UPDATE one would not); keyless jobs never call them.
create trigger jobs_key_free before update on tickq.jobs
    for each row
    when (old.idempotency_key is not null
          and new.status in ('dead', 'cancelled')
          and old.status not in ('dead', 'cancelled'))
    execute function tickq.job_keys_free();

-- A job that becomes dead, by any path (finish, reclaim of an expired lease at its last
-- attempt, dependency settlement, a step, the operator functions), writes its `Job Dead`
-- event into the outbox in the same statement (tickq.outbox_job_dead). BEFORE, as
-- jobs_key_free, since the update usually moves the row to the finished partition; every
-- other update evaluates the condition and nothing else.
create trigger jobs_outbox_dead before update on tickq.jobs
    for each row
    when (new.status = 'dead' and old.status <> 'dead')
    execute function tickq.outbox_job_dead();

-- A dead or cancelled job sent back to the queue (jobs_retry, operator_retry) takes its key
-- again, or the statement fails with a unique violation and changes nothing.
create trigger jobs_key_take before update on tickq.jobs
    for each row
    when (old.idempotency_key is not null
          and old.status in ('dead', 'cancelled')
          and new.status not in ('dead', 'cancelled'))
    execute function tickq.job_keys_take();

-- Every inserted keyed job that is not dead or cancelled takes its key, whatever wrote it
-- (a plain INSERT, COPY, tickq.enqueue, tickq's enqueue statements), or the statement
-- fails with a unique violation. Keyless jobs (most) evaluate the condition and nothing
-- else; tickq's enqueue statements, which took the key just before, pay one index probe
-- per keyed job (tickq.job_keys_take).
create trigger jobs_key_insert before insert on tickq.jobs
    for each row
    when (new.idempotency_key is not null and new.status not in ('dead', 'cancelled'))
    execute function tickq.job_keys_take();

-- Emptying the jobs (tests, benchmarks, a reset) empties the keys with them.
create trigger jobs_keys_truncate after truncate on tickq.jobs
    for each statement execute function tickq.job_keys_truncate();

-- Every inserted job's id is taken in tickq.job_ids, whoever inserts: a duplicate of any
-- job's id, in any partition, fails the insert (tickq.job_ids_take). Once per statement.
create trigger jobs_ids_take after insert on tickq.jobs
    referencing new table as arrived
    for each statement execute function tickq.job_ids_take();

-- A job's id never changes (tickq.jobs_id_fixed): the side tables and tickq.job_ids name it.
-- Fires only for an update that sets the id.
create trigger jobs_id_fixed before update of id on tickq.jobs
    for each row execute function tickq.jobs_id_fixed();

-- A deleted job takes its key, steps, signals and dependency edges with it, once per
-- statement with the deleted rows (tickq.jobs_forget).
create trigger jobs_forget after delete on tickq.jobs
    referencing old table as gone
    for each statement execute function tickq.jobs_forget();

-- Emptying the jobs empties the steps, signals and dependency edges too.
create trigger jobs_forget_all after truncate on tickq.jobs
    for each statement execute function tickq.jobs_forget_all();

-- Dependency edges that application users write, by any statement: one owner at both ends,
-- and a bounded number of children per parent (tickq.job_dependencies_app_admit).
create trigger job_dependencies_app_admit after insert on tickq.job_dependencies
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.job_dependencies_app_admit();

-- Signals that application users insert, by any statement: a bounded number per job
-- (tickq.job_signals_app_admit).
create trigger job_signals_app_admit after insert on tickq.job_signals
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.job_signals_app_admit();

-- A gate row goes with its job (tickq.job_gates_have_jobs): checked at commit.
create constraint trigger job_gates_have_jobs after insert on tickq.job_gates
    deferrable initially deferred
    for each row execute function tickq.job_gates_have_jobs();
