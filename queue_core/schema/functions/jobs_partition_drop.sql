-- Drop one day partition whose every job retention lets go (queue_core/policies/retention.py decides
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
            -- Only a parent has a settlement: its few rows, through jobs_done_parents_idx.
            execute format('delete from tickq.job_settlements x using tickq.%I j'
                           ' where x.parent_id = j.id and j.has_children', p_name);
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

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.jobs_partition_drop(text) from public;
grant execute on function tickq.jobs_partition_drop(text) to tickq_worker;
