-- Each rule once: a job's rows in every table that hangs on it go the same way whether the
-- job is deleted (tickq.jobs_forget) or its day partition dropped (tickq.jobs_partition_drop),
-- as tickq.jobs_forget_all empties them: a deleted parent's settlement goes with it too.

-- A deleted job takes the rows that hang on it (its key, steps, step tries, signals,
-- dependency edges, settlement, gate and workflow children), as foreign keys' cascades
-- would (a partitioned tickq.jobs cannot be referenced by id alone): one list of tables,
-- the same as tickq.jobs_forget_all and tickq.jobs_partition_drop empty
-- (tests/unit/test_job_tables.py holds the three to it). A statement trigger with the
-- deleted rows (jobs_forget, triggers.sql): one set-based delete per table and statement,
-- and nothing at all for statements that delete no job. Security definer, as a cascade:
-- the rows go whoever deleted the job. Key rows are found by key (keyless deleted jobs
-- match none).
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
    delete from tickq.job_settlements x using gone g where x.parent_id = g.id;
    delete from tickq.job_gates x using gone g where x.job_id = g.id;
    delete from tickq.job_step_tries t using gone g where t.job_id = g.id;
    delete from tickq.job_ids i using gone g where i.id = g.id;
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

-- Drop one day partition whose every job retention lets go (queue_core/retention.py decides
-- which), with the rows that hang on its jobs (their idempotency keys, steps, signals,
-- dependency edges, settlements and gates, as tickq.jobs_forget takes them), in one
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
            execute format('delete from tickq.job_settlements x using tickq.%I j'
                           ' where x.parent_id = j.id', p_name);
            execute format('delete from tickq.job_gates x using tickq.%I j'
                           ' where x.job_id = j.id', p_name);
            execute format('delete from tickq.job_step_tries t using tickq.%I j'
                           ' where t.job_id = j.id', p_name);
            execute format('delete from tickq.job_children k using tickq.%I j'
                           ' where k.child_id = j.id or k.parent_id = j.id', p_name);
            execute format('delete from tickq.job_ids i using tickq.%I j'
                           ' where i.id = j.id', p_name);
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
