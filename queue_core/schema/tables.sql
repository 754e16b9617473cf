-- tickq's tables, their columns, constraints and indexes, as a database has them today.
-- Applied first (queue_core/migrate.py, SCHEMA_FILES); functions, triggers and policies
-- come after. The day partitions of finished jobs are not here: they are made at run time
-- by tickq.jobs_partitions_ensure (functions/jobs_partitions_ensure.sql).

create schema if not exists tickq;

-- The versions a database is at: the baseline, then each later migration, applied once.
create table if not exists tickq.schema_migrations (
    version    text primary key,
    applied_at timestamptz not null default now()
);

-- The text of each function file (queue_core/schema/functions/) a database last applied,
-- by digest: the migrator applies a file again when its text differs.
create table if not exists tickq.schema_functions (
    file       text primary key,
    digest     text not null,
    applied_at timestamptz not null default now()
);

-- The queue: one logical table, one row per job, in two kinds of storage (docs/operations.md,
-- "Partitions"): live jobs (waiting, queued, running, retrying) in the small partition
-- tickq.jobs_live with the claim, lease, fairness and retry indexes; finished jobs
-- (succeeded, dead, cancelled) in tickq.jobs_done, partitioned again by finish time, one
-- partition per UTC day (tickq.jobs_done_YYYYMMDD) and a default one that catches a finish
-- whose day has no partition yet, so a missing partition never fails a finish.
--
-- The partition key is the status: every statement about live jobs names the statuses it
-- reads (status = 'running', status in ('queued', 'retrying')), so the planner reads
-- jobs_live alone and a finish never probes the indexes of finished days. A job that
-- finishes (or is retried from dead) moves between partitions inside its UPDATE.
--
-- What the partitioning means for the database around the table:
-- * Ids stay unique because the engine generates them (gen_random_uuid, uuid4): a
--   partitioned table cannot hold a unique index without its partition key, so tickq.jobs
--   has a plain index on id in every partition.
-- * Foreign keys cannot reference a partitioned table by id alone: the step, signal,
--   dependency and key rows of a deleted job go with it through the trigger jobs_forget
--   (triggers.sql), and with a dropped partition through tickq.jobs_partition_drop.
-- * Idempotency keys are held in tickq.job_keys (below), not by a unique index.
create table tickq.jobs (
    id               uuid not null default gen_random_uuid(),
    queue            text not null default 'default',
    type             text not null,
    user_id          uuid,
    status           text not null default 'queued',
    payload          jsonb not null default '{}'::jsonb,
    idempotency_key  text,
    attempts         integer not null default 0,
    max_attempts     integer not null default 3,
    priority         integer not null default 0,
    run_after        timestamptz not null default now(),
    lease_until      timestamptz,
    lease_token      uuid,
    progress         jsonb,
    result           jsonb,
    error            text,
    errors           jsonb not null default '[]'::jsonb,
    lease_seconds    integer,
    backoff_base     double precision not null default 1,
    backoff_factor   double precision not null default 2,
    backoff_max      double precision not null default 300,
    backoff_jitter   double precision not null default 0,
    cancel_requested boolean not null default false,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    -- Durable steps (queue_core/model/steps.py), read only by the step statements and the views
    -- of one job, never by the claim: a plain job stores nulls here (one bit each in the
    -- row's null bitmap) and no statement of its life reads them.
    resumes          integer,           -- times the job suspended and came back (null: 0)
    wait_kind        text,              -- what the last suspension waits for
    wait_name        text,              -- the sleep's or the awaited signal's name
    wait_until       timestamptz,       -- wake time, or the signal's timeout
    -- Names of the signals delivered to the job. On the row, not only in job_signals, so a
    -- suspension racing a signal sees it: both write this row, and PostgreSQL re-reads the
    -- row (not other tables) when an update waits for another's lock.
    signals          text[],
    -- Dependencies (queue_core/model/dependencies.py). pending_parents: parents not yet
    -- succeeded; the last success brings it to 0 and releases the job, so a release costs
    -- one decrement per finished parent, never a recount. has_children: set on a parent
    -- when a dependent job is enqueued; finishing a job looks for children only when it is
    -- set, so jobs without children (nearly all) pay one boolean test and no index probe.
    pending_parents  integer not null default 0,
    has_children     boolean not null default false,
    -- Fairness (queue_core/model/fairness.py): every job belongs to one group, the group given at
    -- enqueue, else its user_id as text, else the shared group ''. Stored (not computed at
    -- claim time) so that an index can deliver the groups in order. Collation "C": byte
    -- order, the order in which the claim sweeps groups and workers remember where they
    -- stopped, identical in Python and SQL.
    group_key        text collate "C" not null default '',
    -- The priority an application user (the HTTP API, tickq.enqueue as the application
    -- role) gave its job: it orders only that owner's jobs of one group, after the global
    -- level (priority), which is 0 for every job such a caller enqueues (tickq.jobs_app_own).
    -- Jobs of trusted enqueuers keep 0 here and their level in priority.
    owner_priority   integer not null default 0,
    -- Handler semantics (queue_core/runner/batch_handler.py, queue_core/postgres/transactional.py),
    -- read only by the views of one job, never by the claim: a plain job keeps nulls here.
    -- batch_id: the batch handler call the job's last persisted attempt ran in, stored by
    -- the finish with that outcome; completed_in_transaction: its success committed in the
    -- handler's own transaction (null: not).
    batch_id                 uuid,
    completed_in_transaction boolean,
    -- The enqueuer's trace context (W3C traceparent) when OpenTelemetry is on, so the run
    -- continues the caller's trace (queue_core/telemetry.py); null (one bit) otherwise.
    -- Taken from the transaction's setting tickq.traceparent, so every insert path (tickq's
    -- enqueue statements, tickq.enqueue, plain SQL) records the context its caller set.
    traceparent      text default nullif(current_setting('tickq.traceparent', true), ''),
    -- Times a handler snoozed the job (RetryAfter): each gives back the attempt its claim
    -- counted, so attempts and max_attempts keep counting runs against what was declared.
    snoozes          integer not null default 0,
    -- Seconds the handler may run before the runner stops it (null: no limit of its own).
    -- An enqueue stores a lease of at least this plus a margin (TIMEOUT_LEASE_MARGIN).
    timeout_seconds  integer,
    -- The code version its last run ran under (queue_core/model/catalog.py's code_version), set
    -- by the first step statement of a durable run (its load, or a suspension): a plain job
    -- keeps null. `tickq deploy check` and TICKQ_PIN_VERSION read it.
    code_version     text,
    -- What the job touches, for the flow limits (tickq.flow_limits, tickq.flow_holds): the
    -- keys the caller gave and its task's templates filled from the payload; an outside
    -- caller's (the API's, the application login's) stored as '<owner>/key'.
    flow_keys        text[] not null default '{}',
    -- A saga's compensation (docs/steps.md) raises max_attempts to leave its undos attempts;
    -- these keep, from the first time it began, the max_attempts declared and the attempts
    -- counted then, so the views show the declared max and the compensation's runs apart
    -- (queue_core/model/jobs.py). Null on a job that never compensated; a retry nulls both
    -- again, its fresh attempts counted against the declared max_attempts it restores.
    declared_max_attempts integer,
    compensation_attempts integer,

    -- Bounds on what a row may hold, for every role, the owner included, however the row is
    -- written (the API's enqueue, tickq.enqueue, plain SQL): nothing the engine cannot read
    -- back. Each is at least what the API accepts; the numbers are queue_core/bounds.py's,
    -- which says why each is what it is (tests/integration/test_column_bounds.py holds the
    -- two equal). Sizes of JSON values are their stored size, read from the value's header
    -- (pg_column_size), or from the value itself when it comes compressed (from a stored
    -- row, or copied from another table), so a value that compresses well cannot pass as
    -- small; lengths of error text are bytes (octet_length, read from the header too).
    constraint jobs_status_check check (
        status in ('waiting', 'queued', 'running', 'retrying', 'succeeded', 'dead',
                   'cancelled')),
    constraint jobs_payload_object check (jsonb_typeof(payload) = 'object'),
    constraint jobs_attempts_check check (attempts >= 0 and attempts <= max_attempts),
    -- Above the API's 1000: a saga's compensation adds attempts (bounds.py).
    constraint jobs_max_attempts_check check (max_attempts >= 1 and max_attempts <= 1000000000),
    constraint jobs_compensation_counts_check check (
        declared_max_attempts between 1 and max_attempts
        and compensation_attempts between 0 and max_attempts),
    -- A lease exists exactly while the job runs: no running job without one, no stale token.
    constraint jobs_lease_check check (
        (status = 'running') = (lease_token is not null and lease_until is not null)),
    constraint jobs_lease_seconds_check check (
        lease_seconds is null or lease_seconds between 1 and 43200),
    constraint jobs_timeout_seconds_check check (
        timeout_seconds is null or timeout_seconds between 1 and 43200),
    constraint jobs_code_version_check check (char_length(code_version) <= 200),
    -- At most 8 keys of a plain alphabet (no comma), one dimension, no null or empty key: 200
    -- characters as given, an owner's uuid and '/' more as stored (queue_core/model/flow.py).
    constraint jobs_flow_keys_check check (
        cardinality(flow_keys) <= 8
        and (flow_keys = '{}'
             or (array_ndims(flow_keys) = 1 and array_position(flow_keys, null) is null
                 and array_to_string(flow_keys, ',') collate "C"
                     ~ '^[A-Za-z0-9_.:/@=+-]{1,240}(,[A-Za-z0-9_.:/@=+-]{1,240})*$'))),
    -- backoff.Backoff's rules, so a retry delay always fits an interval.
    constraint jobs_backoff_check check (
        backoff_base > 0 and backoff_base <= 86400
        and backoff_factor >= 1 and backoff_factor <= 100
        and backoff_max >= backoff_base and backoff_max <= 604800
        and backoff_jitter between 0 and 1),
    constraint jobs_wait_kind_check check (
        wait_kind in ('suspend', 'sleep', 'signal', 'children')),
    constraint jobs_pending_parents_check check (pending_parents >= 0),
    constraint jobs_group_key_check check (char_length(group_key) <= 128),
    constraint jobs_traceparent_check check (
        traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    constraint jobs_resumes_check check (resumes >= 0),
    constraint jobs_snoozes_check check (snoozes >= 0),
    -- Every time finite and inside the years a Python datetime holds (tickq.readable_time).
    constraint jobs_times_check check (
        run_after between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and lease_until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and updated_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and started_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and finished_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and wait_until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'),
    constraint jobs_names_check check (
        char_length(type) <= 128 and char_length(queue) <= 128
        and char_length(idempotency_key) <= 255 and char_length(wait_name) <= 128),
    constraint jobs_error_check check (octet_length(error) <= 16000),
    constraint jobs_signals_check check (
        cardinality(signals) <= 100 and octet_length(array_to_string(signals, '')) <= 51200),
    constraint jobs_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 2097152),
    constraint jobs_result_size_check check (
        pg_column_size(case when pg_column_compression(result) is null then result
                            else result #> '{}' end) <= 8388608),
    constraint jobs_progress_size_check check (
        pg_column_size(case when pg_column_compression(progress) is null then progress
                            else progress #> '{}' end) <= 2097152),
    -- An array, as tickq.error_history appends to it on every failure.
    constraint jobs_errors_check check (
        jsonb_typeof(errors) = 'array'
        and pg_column_size(case when pg_column_compression(errors) is null then errors
                                else errors #> '{}' end) <= 1048576),
    -- JSON a worker reads back with Python's json module, which recurses once per array or
    -- object: at most 64 of them nested in a value (validation.MAX_JSON_DEPTH), so none is
    -- found 64 levels below the top.
    constraint jobs_json_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            progress, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            result, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")')
        and not jsonb_path_exists(
            errors, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'))
) partition by list (status);

-- Storage settings of the heap that churns (docs/operations.md, "Table bloat and
-- autovacuum"; measured by `python -m bench.table_health` and `python -m bench.dead_tuples`,
-- figures in docs/benchmarks.md):
-- * Every job leaves two dead row versions (claim, finish), and none of those updates can be
--   HOT: status and lease_until are index keys or partial-index predicates, so the
--   measurement saw 0 HOT updates out of 2M. A fillfactor below 100 would only spread live
--   rows over more pages; it stays at 100.
-- * Vacuum once 1000 row versions are dead (or inserted), a fixed count and no share of the
--   table: dead tuples come at the pace of the throughput, not of the table's size, and a
--   share of the row estimate lets a past backlog (or a few dozen live rows) decide when
--   vacuum comes. Unthrottled: the dead tuples sit at the hot end of the claim index, and a
--   throttled vacuum on a busy queue never catches up. The TOAST table (large payloads and
--   results) churns with the heap, so it gets the same. How often autovacuum looks at the
--   table at all is the server's autovacuum_naptime, which no table setting can shorten.
-- * Analyze after 2% changes: the claim's plans follow the live rows' statistics.
create table tickq.jobs_live partition of tickq.jobs
    for values in ('waiting', 'queued', 'running', 'retrying')
    with (
        autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0,
        autovacuum_vacuum_insert_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0,
        toast.autovacuum_vacuum_scale_factor = 0,
        toast.autovacuum_vacuum_threshold = 1000,
        toast.autovacuum_vacuum_insert_scale_factor = 0,
        toast.autovacuum_vacuum_insert_threshold = 1000,
        toast.autovacuum_vacuum_cost_delay = 0
    );

-- Every later ANALYZE writes "all distinct" for the live ids, whatever its sample: lookups
-- by id plan as lookups of unique ids (functions/jobs_live_id_statistics.sql says why).
alter table tickq.jobs_live alter column id set (n_distinct = -1);

create table tickq.jobs_done partition of tickq.jobs
    for values in ('succeeded', 'dead', 'cancelled')
    partition by range (finished_at);

create table tickq.jobs_done_default partition of tickq.jobs_done default;

-- On every partition: lookups by id, and a user's job list, newest first, with keyset
-- pagination on (created_at, id). (The order of the index statements here gives the
-- partitions' copies of them their names.)
create index jobs_id_idx on tickq.jobs (id);
create index jobs_owner_idx on tickq.jobs (user_id, created_at desc, id desc)
    where user_id is not null;

-- Live jobs only. The claim: runnable rows in exactly the claim query's order, so a claim
-- reads the first N entries instead of sorting the backlog.
-- owner_priority fills the padding between priority and run_after: no larger entries.
create index jobs_claim_idx on tickq.jobs_live
    (queue, priority desc, owner_priority desc, run_after, created_at)
    where status in ('queued', 'retrying');
-- The fair claim: within a queue and a priority level, runnable rows by tenant (the group
-- key up to its first '/'), then group, then in claim order, so one probe finds the next
-- tenant after a given one, or the next group of a tenant (loose index scans), and a few
-- entries give a group's best jobs.
create index jobs_fair_idx on tickq.jobs_live
    (queue, priority desc, (split_part(group_key, '/', 1)), group_key, owner_priority desc,
     run_after, created_at)
    where status in ('queued', 'retrying');
-- A limited queue's depth counts jobs waiting for parents too: a few entries of this one
-- (only waiting jobs enter it) instead of a scan of the live jobs.
create index jobs_waiting_idx on tickq.jobs_live (queue) where status = 'waiting';
-- Reclaiming expired leases scans only running jobs by lease expiry.
create index jobs_lease_idx on tickq.jobs_live (lease_until) where status = 'running';
-- Jobs waiting to retry, by the time of their last failure; only failing jobs enter it.
create index jobs_retrying_idx on tickq.jobs_live (updated_at) where status = 'retrying';

-- Finished jobs only: listing, filtering and retention by status and age (dead letters,
-- pruning), the console's failure counts (partial on errors, so a job that never fails
-- never enters it), and the parents retention must keep while a child still needs them.
create index jobs_finished_idx on tickq.jobs_done (status, finished_at);
create index jobs_failed_finished_idx on tickq.jobs_done (finished_at)
    where errors <> '[]'::jsonb;
create index jobs_done_parents_idx on tickq.jobs_done (finished_at) where has_children;

-- Idempotency keys, one row per held key. A key is held by a queued, running, retrying,
-- waiting or succeeded job, taken by every insert whatever its path and by a retry (the
-- triggers jobs_key_insert and jobs_key_take), and freed when its job becomes dead or
-- cancelled, or is deleted (the triggers jobs_key_free, jobs_forget and
-- jobs_keys_truncate, and tickq.jobs_partition_drop). No foreign key to tickq.jobs (a partitioned table cannot be
-- referenced): every path that frees a key deletes its row. No delete trigger: an update
-- that moves a row to another partition fires the BEFORE DELETE triggers with the row as it
-- was, which would free the key of a job that just succeeded.
create table tickq.job_keys (
    idempotency_key text not null,
    user_id         uuid,
    job_id          uuid not null,
    -- The arbiter of every keyed enqueue; keys are scoped to their owner, so one user can
    -- neither collide with nor probe another user's keys, and a key of no owner (a
    -- worker's enqueue) is one key too. Key rows are also found by it when they go (by
    -- key, owner and job id), so there is no second index on job ids.
    constraint job_keys_key unique nulls not distinct (idempotency_key, user_id)
);

-- Debounce and throttle (queue_core/model/gates.py, tickq.job_gate): one row per job a gate
-- created, the key's latest job being the one an enqueue of the key may land on. A deleted
-- job takes its row with it (tickq.jobs_forget, jobs_forget_all, jobs_partition_drop): no
-- foreign key, as for tickq.job_keys.
create table tickq.job_gates (
    job_id     uuid primary key,  -- the job's gate, for its views (debounced N times)
    kind       text not null,
    gate_key   text not null,
    user_id    uuid,              -- keys are per owner, as idempotency keys
    first_at   timestamptz not null,  -- its first enqueue: debounce's bound, throttle's window
    enqueues   integer not null default 1,  -- the enqueues that landed on the job
    constraint job_gates_kind_check check (kind in ('debounce', 'throttle')),
    -- The bounds of queue_core/bounds.py, as on tickq.jobs.
    constraint job_gates_key_check check (char_length(gate_key) <= 255),
    constraint job_gates_first_at_check check (
        first_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);
-- A gate key's turn (tickq.job_gate): each gated enqueue inserts its key's row and deletes it
-- in its own transaction, so the next enqueue of the key waits for that transaction to end.
-- Empty at rest; no role but the owner may touch it.
create table tickq.job_gate_turns (
    kind     text not null,
    gate_key text not null,
    owner    uuid not null,  -- the nil uuid for a worker's ownerless enqueue
    primary key (kind, owner, gate_key)
);

-- The key's latest job, per owner (a null owner, a worker's enqueue, as one owner: the nil
-- uuid, which no user holds), read by every gated enqueue.
create index job_gates_key_idx on tickq.job_gates (
    kind, gate_key, coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid),
    first_at desc);

-- Every job's id, once (tickq.job_ids_take, on every insert into tickq.jobs). tickq.jobs is
-- partitioned by status, and a partitioned table cannot hold a unique index without its
-- partition key, so its per-partition id indexes cannot refuse a new job whose id another
-- partition holds: a login that chose such an id shared a lease token and the step
-- results, signals and outcome of the other job. This table's key refuses it for every
-- role. A deleted job takes its row (tickq.jobs_forget, jobs_forget_all,
-- jobs_partition_drop). No role but the owner touches it.
create table tickq.job_ids (
    id uuid primary key
);

-- Durable steps (queue_core/model/steps.py): one row per completed step, the primary key making
-- a step's result stored at most once; and the signals sent to a job.
create table tickq.job_steps (
    job_id      uuid not null,
    name        text not null,
    result      jsonb,
    size        integer not null,
    finished_at timestamptz not null,
    -- Stored with an undo (a saga's step): a job that ends dead or cancelled away from its
    -- handler (the reclaim, a cancel while not running) compensates when it has one.
    compensable boolean not null default false,
    -- The code version of the run that stored it (queue_core/model/catalog.py's code_version).
    code_version text,
    primary key (job_id, name),
    -- The bounds of queue_core/bounds.py, as on tickq.jobs: a job's replay reads them all.
    constraint job_steps_name_check check (name <> '' and char_length(name) <= 128),
    constraint job_steps_result_size_check check (
        pg_column_size(case when pg_column_compression(result) is null then result
                            else result #> '{}' end) <= 2097152),
    constraint job_steps_size_check check (size between 0 and 262144),
    constraint job_steps_code_version_check check (char_length(code_version) <= 200),
    constraint job_steps_finished_at_check check (
        finished_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'),
    constraint job_steps_result_depth_check check (
        not jsonb_path_exists(
            result, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'))
);

create table tickq.job_signals (
    job_id  uuid not null,
    name    text not null,
    payload jsonb,
    size    integer not null,
    sent_at timestamptz not null,
    primary key (job_id, name),
    constraint job_signals_name_check check (name <> '' and char_length(name) <= 128),
    constraint job_signals_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 524288),
    constraint job_signals_size_check check (size between 0 and 65536),
    constraint job_signals_sent_at_check check (
        sent_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'),
    constraint job_signals_payload_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'))
);

-- Durable workflows (queue_core/model/steps.py): the tries of steps that retry on their own, the
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
    -- 'patch': a marker job.patched(name) left where a run first passed it under code that
    -- has the call (tries 0).
    constraint job_step_tries_kind_check check (
        kind in ('step', 'undo', 'compensation', 'patch')),
    constraint job_step_tries_name_check check (char_length(name) <= 128),
    constraint job_step_tries_error_check check (octet_length(error) <= 16000),
    constraint job_step_tries_times_check check (
        at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and done_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
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
    constraint job_children_max_running_check check (max_running >= 1),
    constraint job_children_step_check check (char_length(step) <= 128)
);

-- A child's finish finds its parent by the child's id.
create index job_children_child_idx on tickq.job_children (child_id);

-- Job dependencies: one row per edge (child waits for parent). A child is `waiting` while
-- any parent is unfinished, released to `queued` in the transaction of its last parent's
-- success, and cancelled (with every waiting descendant) in the transaction of a parent's
-- failure (tickq.jobs_settle). Retention never deletes a parent an unfinished child still
-- needs, so a deleted end is always a finished job whose edges nobody reads any more.
create table tickq.job_dependencies (
    child_id   uuid not null,
    parent_id  uuid not null,
    -- The child's owner, so row-level security scopes edges like the jobs they join.
    user_id    uuid,
    -- Whether the child's pending_parents counts this parent: true when tickq's enqueue
    -- wrote the edge while the parent had not succeeded. A parent's success decrements only
    -- counted edges, so a child enqueued after it succeeded, while its release was still
    -- being worked off (tickq.job_settlements), is not released by it a second time.
    counted    boolean not null default false,
    primary key (child_id, parent_id)
);

-- Releasing or cancelling the children of a finished parent is a lookup by parent, never a
-- scan (the primary key serves the child's side: its parents), in child order, so a
-- settlement worked off in slices resumes after the last child it settled.
create index job_dependencies_parent_idx on tickq.job_dependencies (parent_id, child_id);

-- Settlements still being worked off: a finished parent whose children (released on
-- success, cancelled with their waiting descendants on failure) are more than one statement
-- settles (tickq.jobs_settle's budget, 1000). The statement that finished the parent wrote
-- this row in its transaction, so no child is forgotten, crash or not; later short
-- transactions (tickq.jobs_settle_pending, run by every tick) settle the rest in child
-- order after after_child. root_id and root_status: the failed job a cancellation names.
create table tickq.job_settlements (
    parent_id   uuid primary key,
    status      text not null,
    root_id     uuid not null,
    root_status text not null,
    after_child uuid,
    -- The parent's owner, so row-level security scopes settlements like the jobs.
    user_id     uuid,
    created_at  timestamptz not null default now(),
    constraint job_settlements_status_check check (
        status in ('succeeded', 'dead', 'cancelled')
        and root_status in ('succeeded', 'dead', 'cancelled'))
);
-- Worked off oldest first (tickq.jobs_settle_pending), so no settlement waits behind later
-- ones, however many.
create index job_settlements_created_idx on tickq.job_settlements (created_at, parent_id);

-- The task catalogue (queue_core/model/catalog.py): each job type's settings as the workers'
-- code declares them, published by every worker and tick when it starts and by `tickq tasks
-- sync` (a deploy step), so an enqueue by a process without the handler's module (a web
-- process, the CLI, SQL, another language) gets the task's own settings for what it leaves
-- out. `defaults` holds them in the shape of an enqueue request (queue, max_attempts,
-- lease_seconds, priority, backoff); `settings` the rest, as they come (events, a step's
-- time, a batch size...). Once it knows any type, an enqueue of a type it does not know is
-- refused (tickq.enqueue_job), unless the setting tickq.accept_unknown_types is on.
create table tickq.task_catalog (
    type         text primary key,
    defaults     jsonb not null default '{}',
    settings     jsonb not null default '{}',
    code_version text,
    published_at timestamptz not null default now(),
    constraint task_catalog_type_check check (
        char_length(type) between 1 and 128
        and type collate "C" ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$'),
    constraint task_catalog_defaults_check check (
        jsonb_typeof(defaults) = 'object' and octet_length(defaults::text) <= 4096),
    constraint task_catalog_settings_check check (
        jsonb_typeof(settings) = 'object' and octet_length(settings::text) <= 16384),
    constraint task_catalog_code_version_check check (char_length(code_version) <= 200),
    constraint task_catalog_published_at_check check (
        published_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);

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
    -- The group of the jobs it enqueues (null: the shared group).
    group_key    text,
    -- The flow keys of the jobs it enqueues, besides their task's templates (as given:
    -- an enqueue's bounds).
    flow_keys    text[] not null default '{}',

    constraint schedules_missed_check check (missed in ('latest', 'skip')),
    constraint schedules_flow_keys_check check (
        cardinality(flow_keys) <= 8
        and (flow_keys = '{}'
             or (array_ndims(flow_keys) = 1 and array_position(flow_keys, null) is null
                 and array_to_string(flow_keys, ',') collate "C"
                     ~ '^[A-Za-z0-9_.:/@=+-]{1,200}(,[A-Za-z0-9_.:/@=+-]{1,200})*$'))),
    constraint schedules_payload_object check (jsonb_typeof(payload) = 'object'),
    -- What a schedule enqueues fits tickq.jobs's bounds, so a due schedule's job is never
    -- refused by them; its times are ones the scheduler can read.
    constraint schedules_max_attempts_check check (
        max_attempts >= 1 and max_attempts <= 1000000000),
    constraint schedules_payload_size_check check (
        pg_column_size(case when pg_column_compression(payload) is null then payload
                            else payload #> '{}' end) <= 2097152),
    constraint schedules_names_check check (
        char_length(type) <= 128 and char_length(queue) <= 128
        and char_length(group_key) <= 128),
    constraint schedules_times_check check (
        last_fired between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and next_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and updated_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'),
    constraint schedules_payload_depth_check check (
        not jsonb_path_exists(
            payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")'))
);

-- The scheduler reads only enabled schedules whose next occurrence has come.
create index schedules_due_idx on tickq.schedules (next_at) where enabled;

-- Per-type limits, enforced inside the claim (tickq.claim_limited, tickq.claim_fair): at
-- most max_running jobs of the type running across all workers, at most rate_limit starts
-- in any rate_period_seconds window, and at most max_running_per_group running per
-- fairness group. Running counts are read from the jobs themselves at claim time; no table
-- keeps counts or slots that a crashed worker could leave behind.
create table tickq.type_limits (
    type                  text primary key,
    max_running           integer,
    rate_limit            integer,
    rate_period_seconds   double precision,
    -- A sliding log of recent starts, one entry per claim (time, jobs started), trimmed to
    -- the last period: at most rate_limit entries, so the row stays small.
    recent_at             timestamptz[] not null default '{}',
    recent_n              integer[] not null default '{}',
    updated_at            timestamptz not null default now(),
    max_running_per_group integer,

    constraint type_limits_max_running_check check (max_running is null or max_running >= 1),
    -- The API's bounds (limits.py): a period always fits an interval, and the rate log
    -- (one entry per claim in the period, at most rate_limit) stays small.
    constraint type_limits_rate_check check (
        (rate_limit is null) = (rate_period_seconds is null)
        and (rate_limit is null or rate_limit between 1 and 10000)
        and (rate_period_seconds is null
             or (rate_period_seconds > 0 and rate_period_seconds <= 86400))),
    constraint type_limits_per_group_check
        check (max_running_per_group is null or max_running_per_group >= 1),
    constraint type_limits_some_check
        check (max_running is not null or rate_limit is not null
               or max_running_per_group is not null)
);

-- Per-queue backpressure: enqueue is refused once max_depth jobs wait in the queue (queued,
-- retrying or waiting for parents), and an application user's once it has
-- max_depth_per_owner live jobs in it.
create table tickq.queue_limits (
    queue      text primary key,
    max_depth  integer,
    updated_at timestamptz not null default now(),
    max_depth_per_owner integer,

    constraint queue_limits_max_depth_check check (max_depth >= 1),
    constraint queue_limits_per_owner_check check (max_depth_per_owner >= 1),
    constraint queue_limits_some_check
        check (max_depth is not null or max_depth_per_owner is not null)
);

-- Per-queue cap of running jobs per fairness group, across all workers.
create table tickq.queue_group_limits (
    queue                 text primary key,
    max_running_per_group integer not null,
    updated_at            timestamptz not null default now(),

    constraint queue_group_limits_check check (max_running_per_group >= 1)
);

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
    -- At most retention.MAX_AGE_SECONDS (100 years), so the cut-off always fits an interval.
    constraint retention_policies_max_age_check check (
        max_age_seconds is null or max_age_seconds between 0 and 3153600000),
    constraint retention_policies_keep_last_check check (keep_last is null or keep_last >= 0)
);

-- The operator console. A paused queue's jobs are not claimed; enqueue still works. One row
-- per paused queue, saying who paused it and when. Workers read the whole (tiny) table
-- every few seconds.
create table tickq.queue_pauses (
    queue     text primary key,
    paused_by text not null,
    paused_at timestamptz not null default now(),
    reason    text,

    constraint queue_pauses_reason_check check (reason is null or length(reason) <= 500),
    constraint queue_pauses_paused_by_check check (char_length(paused_by) <= 200),
    constraint queue_pauses_paused_at_check check (
        paused_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);

-- Queue depth over time, sampled by MaintenanceFunction (and `tickq maintain`) from the
-- counts it already reads for its metrics. Kept for a short, fixed time (the sampling
-- statement deletes older rows), so the table stays a few thousand rows.
create table tickq.queue_depth_samples (
    sampled_at              timestamptz not null,
    queue                   text not null,
    depth                   bigint not null,
    running                 bigint not null,
    oldest_runnable_seconds double precision,

    primary key (sampled_at, queue)
);

-- The outbox (queue_core/policies/outbox.py): lifecycle events of jobs (`Job Dead` always, written by
-- the trigger jobs_outbox_dead on every path to dead; others a type opts into, written by
-- the finish) and applications' own events (queue_core.publish), each inserted in the
-- transaction of the change it reports, then published to EventBridge by ticks and
-- MaintenanceFunction in id order. A row stays pending (published_at null) until a
-- publication succeeded; published rows are pruned after a retention period. event_id is
-- the event's stable id, sent in its detail: delivery is at least once, consumers drop
-- repeats by it.
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
    constraint outbox_attempts_check check (attempts >= 0),
    constraint outbox_last_error_check check (octet_length(last_error) <= 16000),
    constraint outbox_times_check check (
        created_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
        and published_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);

-- The publisher reads the pending events oldest first; the backlog's count and age too.
create index outbox_pending_idx on tickq.outbox (id) where published_at is null;
-- Retention deletes the events published before its cut-off.
create index outbox_published_idx on tickq.outbox (published_at) where published_at is not null;

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
