-- Idempotency keys move out of the job row into a table of their own. A partitioned
-- tickq.jobs (live jobs apart from finished ones) cannot keep a unique index that leaves out
-- the partition key, so the partial unique index of migration 0001 gives way to one row per
-- held key. The semantics stay: a key is held by a queued, running, retrying, waiting or
-- succeeded job and freed when its job becomes dead or cancelled, or is deleted.
--
-- No foreign key to tickq.jobs (a partitioned table cannot be referenced): every path that
-- frees a key deletes its row, through the update trigger below or explicitly (whatever
-- deletes jobs, such as retention_prune, deletes their keys in the same statement). No
-- delete trigger: an update that moves a row to another partition fires the BEFORE DELETE
-- triggers with the row as it was, which would free the key of a job that just succeeded.

-- Writers wait while the keys are copied and the index dropped, so no key slips between.
lock table tickq.jobs in exclusive mode;

create table tickq.job_keys (
    idempotency_key text not null,
    user_id         uuid,
    job_id          uuid not null,
    -- The arbiter of every keyed enqueue; keys are scoped to their owner, and a key of no
    -- owner (a worker's enqueue) is one key too, as in the index it replaces.
    constraint job_keys_key unique nulls not distinct (idempotency_key, user_id)
);

-- Frees a job's key when the job dies, is cancelled or deleted.
create index job_keys_job_idx on tickq.job_keys (job_id);

insert into tickq.job_keys (idempotency_key, user_id, job_id)
select j.idempotency_key, j.user_id, j.id
from tickq.jobs j
where j.idempotency_key is not null and j.status not in ('dead', 'cancelled');

drop index tickq.jobs_idempotency_key_idx;

-- Security, as migrations 0002, 0007 and 0012 do for the jobs: an application user claims
-- and reads only its own keys (so it cannot learn whether another user's key exists),
-- workers see every key, and the owner (migrations, the security-definer functions) too.
alter table tickq.job_keys enable row level security;
alter table tickq.job_keys force row level security;
do $$
begin
    execute format(
        'create policy job_keys_table_owner on tickq.job_keys to %I'
        ' using (true) with check (true)',
        (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
         where c.oid = 'tickq.job_keys'::regclass));
end $$;
create policy job_keys_owner on tickq.job_keys to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_keys_worker on tickq.job_keys to tickq_worker using (true) with check (true);
grant select, insert, delete on tickq.job_keys to tickq_worker;
-- Applications claim keys when they enqueue; keys are freed by the triggers below, which
-- run as the owner, so applications never delete a key row themselves.
grant select, insert on tickq.job_keys to tickq_app;

-- A job that becomes dead or cancelled, by any path (finish, reclaim, cancel, dependency
-- settlement, the operator functions), lets its key go in the same statement. A BEFORE row
-- trigger, since it still fires when a partitioned table moves the row to another
-- partition (an AFTER UPDATE one would not); keyless jobs never call it.
create function tickq.job_keys_free() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k where k.job_id = old.id;
    return new;
end $$;

create trigger jobs_key_free before update on tickq.jobs
    for each row
    when (old.idempotency_key is not null
          and new.status in ('dead', 'cancelled')
          and old.status not in ('dead', 'cancelled'))
    execute function tickq.job_keys_free();

-- A dead or cancelled job sent back to the queue (jobs_retry, operator_retry) takes its key
-- again. If another job took the key meanwhile the statement fails with a unique violation,
-- as the unique index made it fail before, and changes nothing.
create function tickq.job_keys_take() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.job_keys (idempotency_key, user_id, job_id)
    values (new.idempotency_key, new.user_id, new.id)
    on conflict do nothing;
    if not found then
        raise exception 'tickq: idempotency key % is held by another live job',
            new.idempotency_key
            using errcode = 'unique_violation', detail = new.id::text;
    end if;
    return new;
end $$;

create trigger jobs_key_take before update on tickq.jobs
    for each row
    when (old.idempotency_key is not null
          and old.status in ('dead', 'cancelled')
          and new.status not in ('dead', 'cancelled'))
    execute function tickq.job_keys_take();

-- Emptying the jobs (tests, benchmarks, a reset) empties the keys with them. A delete, not
-- a truncate: a TRUNCATE that names both tables is still using the key table here.
create function tickq.job_keys_truncate() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys;
    return null;
end $$;

create trigger jobs_keys_truncate after truncate on tickq.jobs
    for each statement execute function tickq.job_keys_truncate();

revoke all on function tickq.job_keys_free(), tickq.job_keys_take(),
    tickq.job_keys_truncate() from public;

-- The operators' retry asks the key table whether a live job holds the key (the jobs'
-- index on it is gone); otherwise as in migration 0011.
create or replace function tickq.operator_retry(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), candidates as (
    select j.id, j.idempotency_key, j.user_id, j.finished_at
    from tickq.jobs j
    where j.id in (select r.id from requested r) and j.status in ('dead', 'cancelled')
    for update skip locked
), blocked as (
    select c.id from candidates c
    where exists (select from tickq.job_dependencies d
                  join tickq.jobs p on p.id = d.parent_id
                  where d.child_id = c.id and p.status <> 'succeeded')
), chosen as (
    select c.id from candidates c
    where c.id not in (select b.id from blocked b)
      and (c.idempotency_key is null
       or (not exists (select from tickq.job_keys k
                       where k.idempotency_key = c.idempotency_key
                         and k.user_id is not distinct from c.user_id)
           and not exists (select from candidates n
                           where n.idempotency_key = c.idempotency_key
                             and n.user_id is not distinct from c.user_id
                             and (n.finished_at, n.id) > (c.finished_at, c.id))))
), retried as (
    update tickq.jobs j
    set status = 'queued',
        attempts = 0,
        run_after = coalesce(p_now, now()),
        cancel_requested = false,
        finished_at = null,
        updated_at = coalesce(p_now, now())
    from chosen
    where j.id = chosen.id
    returning j.id, j.status
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when b.id is not null then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join blocked b on b.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;
