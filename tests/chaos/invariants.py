"""What must hold in the soak's database at every moment, as SQL returning the offenders.

`chaos.audit` is filled by a trigger on every update of tickq.jobs; `chaos.effects` by the
handlers (see chaos_tasks). Each check returns rows only when the invariant is broken.
"""

from __future__ import annotations

from typing import Any

import psycopg

SCHEMA = """
create schema chaos;
create table chaos.effects (
    id bigserial primary key,
    job_id uuid not null,
    lease_token uuid not null,
    attempt integer not null,
    kind text not null,
    pid integer not null,
    at timestamptz not null
);
create index on chaos.effects (job_id);
create table chaos.audit (
    id bigserial primary key,
    job_id uuid not null,
    old_status text not null,
    new_status text not null,
    old_token uuid,
    new_token uuid,
    attempts integer not null,
    max_attempts integer not null,
    error text,
    at timestamptz not null default clock_timestamp()
);
create index on chaos.audit (job_id);
create function chaos.record_update() returns trigger language plpgsql as $$
begin
    insert into chaos.audit (job_id, old_status, new_status, old_token, new_token,
                             attempts, max_attempts, error)
    values (new.id, old.status, new.status, old.lease_token, new.lease_token,
            new.attempts, new.max_attempts, new.error);
    return null;
end $$;
-- Only changes of status or lease matter; progress and lease extensions are left out.
create trigger jobs_audit after update on tickq.jobs for each row
    when (old.status is distinct from new.status
          or old.lease_token is distinct from new.lease_token)
    execute function chaos.record_update();
"""

CHECKS: dict[str, str] = {
    "attempts beyond max_attempts": """
        select id, attempts, max_attempts from tickq.jobs
        where attempts > max_attempts or attempts < 0
    """,
    "lease without running or running without lease": """
        select id, status from tickq.jobs
        where (status = 'running') <> (lease_token is not null and lease_until is not null)
    """,
    "two live jobs with one idempotency key": """
        select idempotency_key, count(*) from tickq.jobs
        where idempotency_key is not null and status not in ('dead', 'cancelled')
        group by idempotency_key, user_id having count(*) > 1
    """,
    "more than one accepted completion": """
        select job_id, count(*) from chaos.audit
        where new_status = 'succeeded' group by job_id having count(*) > 1
    """,
    "a terminal job changed again": """
        select job_id, old_status, new_status from chaos.audit
        where old_status in ('succeeded', 'dead', 'cancelled')
    """,
    "side effect without a live lease": """
        select e.job_id, e.kind, e.at from chaos.effects e
        where not exists (select from chaos.audit c
                          where c.job_id = e.job_id and c.new_token = e.lease_token
                            and c.at <= e.at)
           or exists (select from chaos.audit r
                      where r.job_id = e.job_id and r.old_token = e.lease_token
                        and r.new_token is distinct from e.lease_token and r.at < e.at)
    """,
    "accepted completion without its attempt's side effect": """
        select a.job_id from chaos.audit a
        where a.new_status = 'succeeded'
          and not exists (select from chaos.effects e
                          where e.job_id = a.job_id and e.lease_token = a.old_token
                            and e.kind = 'done')
    """,
}

FINAL_CHECKS: dict[str, str] = {
    "job not finished (stuck)": """
        select id, status, attempts, run_after, lease_until from tickq.jobs
        where status not in ('succeeded', 'dead', 'cancelled')
    """,
}


def violations(conn: psycopg.Connection[Any], checks: dict[str, str]) -> list[str]:
    found = []
    for name, query in checks.items():
        rows = conn.execute(query).fetchmany(5)
        if rows:
            found.append(f"{name}: {rows}")
    return found
