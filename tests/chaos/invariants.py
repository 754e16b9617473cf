"""What must hold in the soak's database, computed from evidence the engine never writes.

Three records, each kept apart from the engine's own bookkeeping:

- `chaos.executions`: written by the handlers themselves (see evidence.py): the lease token
  and attempt each execution was given, what it did, the outcome it handed back to the
  runner, and when it started and ended on the database clock.
- `chaos.versions`: every version of every job row (insert, each update, delete), written
  by a trigger, old and new values side by side, including `lease_until`.
- `chaos.enqueues`: what each enqueue asked for and was answered.
- `chaos.step_runs`: for durable steps, each step fn's own record that it completed, under
  which lease; and `chaos.executions.between_steps_at`, set while a handler is inside
  `job.step` with no fn running, where the engine may suspend it.

Every invariant is a named query that returns the offending rows, so a violation prints
the rows that prove it. Add an invariant by adding an entry to ALWAYS (checked while the
soak runs and at the end) or AT_END (checked once the queue has drained); add evidence a
new job kind needs (steps, dependencies, groups) as new tables in SCHEMA.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tests.chaos.limits import RECLAIM_INTERVAL_SECONDS

# The reclaim interval, and a second for the statement that frees the job to commit.
RECLAIM_SLACK = f"interval '{RECLAIM_INTERVAL_SECONDS + 1} seconds'"

SCHEMA = """
create schema chaos;

create table chaos.executions (
    id          bigserial primary key,
    job_id      uuid not null,
    lease_token uuid not null,
    attempt     integer not null,
    action      text not null,
    -- The outcome handed to the runner (see chaos.reports); null while running, and for
    -- ever when the process died first.
    reported    text,
    pid         integer not null,
    started_at  timestamptz not null,
    ended_at    timestamptz,
    -- Durable steps: set while the handler is inside job.step and no step fn runs (see
    -- evidence.BETWEEN_STEPS); a suspension stored meanwhile is the handler's own.
    between_steps_at timestamptz
);
create index on chaos.executions (lease_token);
create index on chaos.executions (job_id);

-- Which job statuses each reported outcome may lead to when the engine accepts it.
create table chaos.reports (reported text not null, status text not null);
insert into chaos.reports values
    ('succeeded', 'succeeded'), ('failed', 'retrying'), ('failed', 'dead'),
    ('permanent', 'dead'), ('snoozed', 'queued'), ('cancelled', 'cancelled'),
    -- Reported after the engine stored it (see _HOLDER_SUSPENDED), its attempt given back.
    ('suspended', 'queued');

create table chaos.versions (
    id                   bigserial primary key,
    op                   text not null,
    job_id               uuid not null,
    at                   timestamptz not null default clock_timestamp(),
    old_status           text,
    new_status           text,
    old_token            uuid,
    new_token            uuid,
    old_lease_until      timestamptz,
    new_lease_until      timestamptz,
    old_attempts         integer,
    new_attempts         integer,
    max_attempts         integer,
    old_run_after        timestamptz,
    new_run_after        timestamptz,
    old_cancel_requested boolean,
    backoff_max          double precision,
    error                text,
    old_snoozes          integer,
    new_snoozes          integer
);
create index on chaos.versions (job_id);
create index on chaos.versions (old_token) where old_token is not null;

-- tickq.jobs is partitioned: an update that moves a job between partitions (it finishes, or
-- a dead one is retried) runs as a delete and an insert, and fires no AFTER UPDATE trigger.
-- So updates are recorded BEFORE (a moved row fires that too; the name sorts after the
-- engine's own BEFORE triggers, so the row is final), and the delete and insert of a move
-- are told apart from real ones: the moved job is still there, or was inserted before. A
-- storage move by maintenance (tickq.jobs_partitions_ensure) is no change to the job.
create function chaos.record_version() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        if current_setting('tickq.moving_rows', true) = 'on'
           or exists (select from chaos.versions v where v.job_id = new.id and v.op = 'insert')
        then
            return null;
        end if;
        insert into chaos.versions (op, job_id, new_status, new_token, new_lease_until,
                                    new_attempts, max_attempts, new_run_after, backoff_max)
        values ('insert', new.id, new.status, new.lease_token, new.lease_until,
                new.attempts, new.max_attempts, new.run_after, new.backoff_max);
        return null;
    elsif tg_op = 'UPDATE' then
        insert into chaos.versions (op, job_id, old_status, new_status, old_token, new_token,
                                    old_lease_until, new_lease_until, old_attempts,
                                    new_attempts, max_attempts, old_run_after, new_run_after,
                                    old_cancel_requested, backoff_max, error, old_snoozes,
                                    new_snoozes)
        values ('update', new.id, old.status, new.status, old.lease_token, new.lease_token,
                old.lease_until, new.lease_until, old.attempts, new.attempts,
                new.max_attempts, old.run_after, new.run_after, old.cancel_requested,
                new.backoff_max, new.error, old.snoozes, new.snoozes);
        return new;
    end if;
    if current_setting('tickq.moving_rows', true) = 'on'
       or exists (select from tickq.jobs j where j.id = old.id) then
        return null;
    end if;
    insert into chaos.versions (op, job_id, old_status, old_token)
    values ('delete', old.id, old.status, old.lease_token);
    return null;
end $$;
-- Every write, with no WHEN clause: a second 'succeeded' over a 'succeeded' row, a lease
-- extension and a progress report all leave a version.
create trigger jobs_versions before update on tickq.jobs
    for each row execute function chaos.record_version();
create trigger jobs_versions_rows after insert or delete on tickq.jobs
    for each row execute function chaos.record_version();

create table chaos.enqueues (
    id              bigserial primary key,
    idempotency_key text,
    job_id          uuid not null,
    duplicate       boolean not null,
    asked_at        timestamptz not null,
    answered_at     timestamptz not null default clock_timestamp()
);
create index on chaos.enqueues (job_id);

-- Durable steps: each step fn's completion, written by the fn itself before it returns.
create table chaos.step_runs (
    id           bigserial primary key,
    job_id       uuid not null,
    name         text not null,
    lease_token  uuid not null,
    attempt      integer not null,
    completed_at timestamptz not null
);
create index on chaos.step_runs (job_id, name);

-- Transactional handlers: the row each execution inserts in its handler's transaction.
create table chaos.tx_rows (job_id uuid not null, attempt integer not null);
create index on chaos.tx_rows (job_id);
"""

# A version that ends a lease: the row leaves a token it held.
_LEASE_ENDS = """
    select v.* from chaos.versions v
    where v.op = 'update' and v.old_token is not null
      and v.new_token is distinct from v.old_token
"""

# The holder of the ended lease had already handed back an outcome that explains the new
# status (the runner persists only after the handler returned).
_HOLDER_REPORTED = """
    exists (select from chaos.executions e join chaos.reports r using (reported)
            where e.lease_token = l.old_token and e.ended_at <= l.at
              and r.status = l.new_status)
"""

# The holder suspended: the job went back to queued while its handler was inside job.step
# with no fn running. The engine stores a suspension in the handler's own call, before the
# handler can report it, so the mark that precedes the write is the evidence.
_HOLDER_SUSPENDED = """
    (l.new_status = 'queued'
     and exists (select from chaos.executions e
                 where e.lease_token = l.old_token and e.between_steps_at <= l.at))
"""

# The holder ran past its job's timeout and its runner stopped it: the failure says so,
# and the holder's own record began at least the timeout before (less a quarter second: the
# runner's clock starts just before the handler writes its record).
_HOLDER_TIMED_OUT = """
    (l.error like 'timed out after %'
     and exists (select from chaos.executions e join tickq.jobs j on j.id = e.job_id
                 where e.lease_token = l.old_token
                   and e.started_at + (j.timeout_seconds - 0.25) * interval '1 second' <= l.at))
"""

# A tick put the job back unstarted, its timeout not fitting in the time the tick had left:
# no handler ran under that lease, and the snooze gives the attempt back.
_PUT_BACK = """
    (l.new_status = 'queued' and l.new_snoozes = l.old_snoozes + 1
     and not exists (select from chaos.executions e where e.lease_token = l.old_token)
     and exists (select from tickq.jobs j
                 where j.id = l.job_id and j.timeout_seconds is not null))
"""

_EXPLAINED = f"({_HOLDER_REPORTED} or {_HOLDER_SUSPENDED} or {_HOLDER_TIMED_OUT} or {_PUT_BACK})"

# When the runner ended an execution's lease at its timeout, if it did: from then on the
# execution (abandoned, or being cancelled) holds no lease.
_TIMEOUT_OF_E = """
    select min(l.at) as at from chaos.versions l
    where l.old_token = e.lease_token and l.new_token is distinct from l.old_token
      and l.error like 'timed out after %'
"""

# The version in which an execution's own suspension ended its lease, if it did.
_SUSPENSION_OF_E = """
    select min(l.at) as at from chaos.versions l
    where l.old_token = e.lease_token and l.new_token is null and l.new_status = 'queued'
      and e.between_steps_at <= l.at
"""

_LEASED_EXECUTIONS = f"""
    select e.id, e.job_id, e.lease_token, e.started_at as lo,
           least(coalesce(e.ended_at, 'infinity'), lease.until,
                 coalesce(suspension.at, 'infinity'), coalesce(stopped.at, 'infinity')) as hi
    from chaos.executions e
    cross join lateral (select max(v.new_lease_until) as until from chaos.versions v
                        where v.new_token = e.lease_token) lease
    cross join lateral ({_SUSPENSION_OF_E}) suspension
    cross join lateral ({_TIMEOUT_OF_E}) stopped
"""

# Each claim of a job with a timeout: when its lease ended (null while it holds), how (the
# error then), and the furthest its lease was ever extended.
_TIMED_CLAIMS = """
    select c.job_id, c.at, j.timeout_seconds * interval '1 second' as timeout,
           j.lease_seconds * interval '1 second' as lease, ended.at as ended_at,
           ended.error, held.until
    from chaos.versions c
    join tickq.jobs j on j.id = c.job_id and j.timeout_seconds is not null
    left join lateral (select l.at, l.error from chaos.versions l
                       where l.old_token = c.new_token and l.new_token is distinct from c.new_token
                       order by l.at limit 1) ended on true
    cross join lateral (select max(v.new_lease_until) as until from chaos.versions v
                        where v.new_token = c.new_token) held
    where c.op = 'update' and c.old_token is null and c.new_token is not null
"""


ALWAYS: dict[str, str] = {
    # One snapshot sees the handler's row and the job's success commit together or not at
    # all: a worker that lost its lease, died or failed after writing commits neither.
    "a transactional job's handler rows disagree with its success": """
        select j.id, j.status, count(r.job_id) from tickq.jobs j
        left join chaos.tx_rows r on r.job_id = j.id
        where j.type = 'chaos-tx'
        group by j.id, j.status
        having count(r.job_id) <> case when j.status = 'succeeded' then 1 else 0 end
    """,
    # Its `Job Succeeded` event rides on the same commit: one exactly when it succeeded.
    "a transactional job's Job Succeeded events disagree with its success": """
        select j.id, j.status, count(o.id) from tickq.jobs j
        left join tickq.outbox o on o.job_id = j.id and o.detail_type = 'Job Succeeded'
        where j.type = 'chaos-tx'
        group by j.id, j.status
        having count(o.id) <> case when j.status = 'succeeded' then 1 else 0 end
    """,
    "more than one accepted completion": """
        select job_id, count(*) from chaos.versions
        where op = 'update' and new_status = 'succeeded'
        group by job_id having count(*) > 1
    """,
    "a terminal row written again": """
        select job_id, old_status, new_status, at from chaos.versions
        where op = 'update' and old_status in ('succeeded', 'dead', 'cancelled')
    """,
    "a lease ended before it expired, by other than its holder's report": f"""
        with l as ({_LEASE_ENDS})
        select l.job_id, (select j.type from tickq.jobs j where j.id = l.job_id),
               l.old_status, l.new_status, l.at, l.old_lease_until, l.error from l
        where l.at < l.old_lease_until and not {_EXPLAINED}
    """,
    "an expired lease reclaimed to the wrong state": f"""
        with l as ({_LEASE_ENDS})
        select l.job_id, l.new_status, l.old_attempts, l.max_attempts,
               l.old_cancel_requested, l.at from l
        where l.at >= l.old_lease_until and not {_EXPLAINED}
          and l.new_status <> case when l.old_cancel_requested then 'cancelled'
                                   when l.old_attempts >= l.max_attempts then 'dead'
                                   else 'retrying' end
    """,
    "dead with attempts left and no permanent error": """
        select v.job_id, v.new_attempts, v.max_attempts, v.error from chaos.versions v
        where v.op = 'update' and v.new_status = 'dead' and v.old_status <> 'dead'
          and v.new_attempts < v.max_attempts
          and not exists (select from chaos.executions e
                          where e.lease_token = v.old_token and e.reported = 'permanent')
    """,
    # Each execution's time under its own lease: from its start until it ended (or for ever,
    # killed) but no later than the lease it was promised. A late starter whose lease had
    # already expired has none, and may run beside the next attempt; two leased ones may not.
    "two executions of a job within their leases at once": f"""
        with x as ({_LEASED_EXECUTIONS})
        select a.job_id, a.lease_token, b.lease_token, a.lo, a.hi, b.lo, b.hi
        from x a join x b on b.job_id = a.job_id and b.id > a.id
        where a.lo < a.hi and b.lo < b.hi and a.lo < b.hi and b.lo < a.hi
    """,
    # Handlers that hang (heartbeating) hold their job only until their timeout: their
    # runner stops them and frees the job within the reclaim interval of it; a worker killed
    # meanwhile leaves a lease its last heartbeat, before the timeout, gave at most, freed by
    # a reclaim pass within that interval of its end. (A heartbeat after the timeout would
    # hold the job for as long as the handler hangs.)
    "a job running past its timeout plus the reclaim interval": f"""
        with c as ({_TIMED_CLAIMS})
        select c.job_id, c.at, c.ended_at, c.error, c.until from c
        where (c.error like 'timed out after %'
               and c.ended_at > c.at + c.timeout + {RECLAIM_SLACK})
           or coalesce(c.ended_at, clock_timestamp())
              > c.at + c.timeout + c.lease + {RECLAIM_SLACK} + interval '2 seconds'
    """,
    "a claim that did not count exactly one attempt": """
        select job_id, old_attempts, new_attempts, at from chaos.versions
        where op = 'update' and old_token is null and new_token is not null
          and new_attempts is distinct from old_attempts + 1
    """,
    # A suspension, or a snooze (counted in snoozes), gives back the attempt its claim
    # counted; nothing else does.
    "an attempt given back other than by its holder's suspension or snooze": f"""
        select l.job_id, l.old_status, l.new_status, l.old_attempts, l.new_attempts, l.at
        from chaos.versions l
        where l.op = 'update' and l.new_attempts < l.old_attempts
          and not (l.old_token is not null and l.new_token is null and {_HOLDER_SUSPENDED})
          and not (l.old_token is not null and l.new_token is null
                   and l.new_snoozes = l.old_snoozes + 1
                   and l.new_attempts = l.old_attempts - 1)
    """,
    "a suspension that did not give its attempt back": f"""
        with l as ({_LEASE_ENDS})
        select l.job_id, l.old_attempts, l.new_attempts, l.at from l
        where {_HOLDER_SUSPENDED} and not {_HOLDER_REPORTED}
          and l.new_attempts is distinct from l.old_attempts - 1
    """,
    "an execution told it was suspended whose lease did not end in a suspension": """
        select e.job_id, e.lease_token, e.ended_at from chaos.executions e
        where e.reported = 'suspended'
          and not exists (select from chaos.versions l
                          where l.old_token = e.lease_token and l.new_token is null
                            and l.new_status = 'queued' and l.at <= e.ended_at
                            and l.new_attempts = l.old_attempts - 1)
    """,
    # Durable steps: a step's result is stored after its fn completed, under the
    # lease that fn ran under, while that lease held; once stored, no later attempt runs it.
    "a stored step whose fn did not complete under the lease it names": """
        select s.job_id, s.name, s.finished_at from tickq.job_steps s
        where not exists (select from chaos.step_runs r
                          where r.job_id = s.job_id and r.name = s.name
                            and r.lease_token = (s.result ->> 'lease_token')::uuid
                            and r.completed_at <= s.finished_at)
    """,
    "a step stored under a lease the job no longer held": """
        select s.job_id, s.name, s.finished_at, l.new_status, l.at from tickq.job_steps s
        join chaos.versions l on l.job_id = s.job_id
            and l.old_token = (s.result ->> 'lease_token')::uuid
            and l.new_token is distinct from l.old_token
        where l.at <= s.finished_at
    """,
    "a stored step's fn run again by a later attempt": """
        select s.job_id, s.name, s.finished_at, r.lease_token, c.at from tickq.job_steps s
        join chaos.step_runs r on r.job_id = s.job_id and r.name = s.name
        join chaos.versions c on c.new_token = r.lease_token and c.old_token is null
        where c.at > s.finished_at
    """,
    "attempts beyond max_attempts": """
        select job_id, new_attempts, max_attempts from chaos.versions
        where new_attempts > max_attempts or new_attempts < 0
    """,
    "an execution given another attempt number than its claim counted": """
        select e.job_id, e.attempt, v.new_attempts from chaos.executions e
        join chaos.versions v on v.new_token = e.lease_token and v.old_token is null
        where e.attempt <> v.new_attempts
    """,
    "an execution under a lease no claim granted": """
        select e.job_id, e.lease_token from chaos.executions e
        where not exists (select from chaos.versions v
                          where v.new_token = e.lease_token and v.old_token is null)
    """,
    "claimed before its run_after": """
        select job_id, old_run_after, at from chaos.versions
        where op = 'update' and old_token is null and new_token is not null
          and old_run_after > at
    """,
    "a retry scheduled later than its backoff allows": """
        select job_id, new_run_after - at, backoff_max from chaos.versions
        where op = 'update' and new_status = 'retrying' and old_status = 'running'
          and new_run_after > at + backoff_max * interval '1 second'
    """,
    "lease without running or running without lease": """
        select job_id, new_status from chaos.versions
        where (new_status = 'running') <> (new_token is not null and new_lease_until is not null)
          and op <> 'delete'
    """,
    "two live jobs with one idempotency key": """
        select idempotency_key, count(*) from tickq.jobs
        where idempotency_key is not null and status not in ('dead', 'cancelled')
        group by idempotency_key, user_id having count(*) > 1
    """,
    "the key table out of step with the live keyed jobs": """
        select coalesce(j.idempotency_key, k.idempotency_key), j.id, k.job_id
        from (select id, idempotency_key, user_id from tickq.jobs
              where idempotency_key is not null and status not in ('dead', 'cancelled')) j
        full join tickq.job_keys k
            on k.job_id = j.id and k.idempotency_key = j.idempotency_key
           and k.user_id is not distinct from j.user_id
        where j.id is null or k.job_id is null
    """,
    "a duplicate answered with a job that was not live": """
        select q.idempotency_key, q.job_id, q.asked_at from chaos.enqueues q
        where q.duplicate
          and (not exists (select from tickq.jobs j
                           where j.id = q.job_id
                             and j.idempotency_key = q.idempotency_key)
               or exists (select from chaos.versions v
                          where v.job_id = q.job_id and v.at < q.asked_at
                            and v.new_status in ('dead', 'cancelled')))
    """,
    "a key answered with a new job while a live job held it": """
        select q.idempotency_key, q.job_id, o.job_id from chaos.enqueues q
        join chaos.enqueues o on o.idempotency_key = q.idempotency_key
            and o.job_id <> q.job_id and not o.duplicate and o.answered_at < q.asked_at
        where not q.duplicate
          and not exists (select from chaos.versions v
                          where v.job_id = o.job_id and v.at < q.answered_at
                            and v.new_status in ('dead', 'cancelled'))
    """,
    "a job deleted": """
        select job_id, old_status from chaos.versions where op = 'delete'
    """,
    # The trigger writes the event in the dying statement's transaction, as the versions
    # trigger writes its row: at any snapshot, one `Job Dead` event per death, never none
    # (an event lost) nor two (an event written twice).
    "a death without exactly one Job Dead event in the outbox": """
        select coalesce(d.job_id, e.job_id), d.deaths, e.events
        from (select job_id, count(*) as deaths from chaos.versions
              where op = 'update' and new_status = 'dead' and old_status <> 'dead'
              group by job_id) d
        full join (select job_id, count(*) as events from tickq.outbox
                   where detail_type = 'Job Dead' group by job_id) e using (job_id)
        where d.deaths is distinct from e.events
    """,
}

AT_END: dict[str, str] = {
    "job lost (enqueued, answered, not in the table)": """
        select q.job_id from chaos.enqueues q
        where not exists (select from tickq.jobs j where j.id = q.job_id)
    """,
    "job stuck (not finished after the drain)": """
        select id, status, attempts, run_after, lease_until from tickq.jobs
        where status not in ('succeeded', 'dead', 'cancelled')
    """,
    # Executions that ended in their own suspension gave their attempt back.
    # A snooze gives its attempt back and counts itself in snoozes.
    "more executions than attempts and snoozes": f"""
        select e.job_id, count(*), j.attempts, j.snoozes from chaos.executions e
        join tickq.jobs j on j.id = e.job_id
        cross join lateral ({_SUSPENSION_OF_E}) suspension
        where suspension.at is null
        group by e.job_id, j.attempts, j.snoozes having count(*) > j.attempts + j.snoozes
    """,
    "a succeeded job of steps without every step stored": """
        select j.id, count(s.name), j.payload ->> 'steps' from tickq.jobs j
        left join tickq.job_steps s on s.job_id = j.id
        where j.status = 'succeeded' and j.payload ? 'steps'
        group by j.id, j.payload having count(s.name) <> (j.payload ->> 'steps')::int
    """,
    "a result that differs from the stored steps": """
        select j.id from tickq.jobs j
        where j.status = 'succeeded' and j.payload ? 'steps'
          and j.result -> 'steps' is distinct from
              (select jsonb_agg(s.result order by s.name) from tickq.job_steps s
               where s.job_id = j.id)
    """,
    "an execution still running after the drain": """
        select e.job_id, e.lease_token from chaos.executions e
        join tickq.jobs j on j.id = e.job_id and j.lease_token = e.lease_token
    """,
}


def violations(conn: psycopg.Connection[Any], checks: dict[str, str]) -> list[str]:
    found = []
    for name, query in checks.items():
        rows = conn.execute(query).fetchmany(5)
        if rows:
            found.append(f"{name}: {rows}")
    return found
