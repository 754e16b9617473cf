-- Day partitions of finished jobs. Gives each of the days from p_from to p_from + p_days
-- (and every day that has rows in the default partition) a partition of its own, moving
-- those rows out of the default first. Each day is one short step under a short lock
-- timeout, retried, so it never holds up the queue for long: a new day holds finishes back
-- only while its (usually empty) rows move and it attaches. Maintenance calls it
-- (queue_core/policies/partitions.py), and `tickq migrate` after every run.
create or replace function tickq.jobs_partitions_ensure(p_from date, p_days integer)
    returns integer
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    set lock_timeout = '200ms'
    as $$
declare
    v_day     date;
    v_name    text;
    v_lo      timestamptz;
    v_hi      timestamptz;
    v_created integer := 0;
    v_try     integer;
begin
    if p_days < 0 or p_days > 366 then
        raise exception 'tickq: p_days must be between 0 and 366, got %', p_days
            using errcode = 'invalid_parameter_value';
    end if;
    for v_day in
        select d::date from generate_series(p_from, p_from + p_days, interval '1 day') d
        union
        select distinct (finished_at at time zone 'UTC')::date
        from tickq.jobs_done_default where finished_at is not null
        order by 1
    loop
        v_name := tickq.jobs_partition_name(v_day);
        continue when to_regclass('tickq.' || v_name) is not null;
        v_lo := v_day::timestamp at time zone 'UTC';
        v_hi := (v_day + 1)::timestamp at time zone 'UTC';
        v_try := 0;
        loop
            begin
                -- Finishes first. A finish picks its partition from the days attached
                -- when it opened jobs_done, before it waits for the default partition's
                -- lock: one that picked the default while this day was missing, and went
                -- on after the attach, would fail the default's new check (and its job,
                -- a transactional handler's work with it). SHARE on jobs_done alone waits
                -- for the finishes in flight and holds new ones back until the commit.
                lock table only tickq.jobs_done in share mode;
                -- Then the default partition: a finish on this day must not land there
                -- between the move below and the attach, which would then fail its check.
                -- Attaching takes this lock anyway; taken first, it also covers the move.
                lock table tickq.jobs_done_default in access exclusive mode;
                execute format(
                    'create table tickq.%I (like tickq.jobs including defaults'
                    ' including constraints including storage including compression,'
                    ' constraint %I check (finished_at is not null'
                    ' and finished_at >= %L and finished_at < %L))',
                    v_name, v_name || '_bounds', v_lo, v_hi);
                -- Rows a finish put in the default partition move to their day first; the
                -- setting tells row triggers that watch the table (tests' recorders) that
                -- this is storage moving, not a job changing.
                perform set_config('tickq.moving_rows', 'on', true);
                execute format(
                    'with moved as (delete from tickq.jobs_done_default'
                    ' where finished_at >= %L and finished_at < %L returning *)'
                    ' insert into tickq.%I select * from moved', v_lo, v_hi, v_name);
                perform set_config('tickq.moving_rows', '', true);
                execute format(
                    'alter table tickq.jobs_done attach partition tickq.%I'
                    ' for values from (%L) to (%L)', v_name, v_lo, v_hi);
                v_created := v_created + 1;
                exit;
            exception when lock_not_available or deadlock_detected then
                v_try := v_try + 1;
                if v_try >= 20 then
                    raise;
                end if;
                perform pg_sleep(0.05 * v_try);
            end;
        end loop;
    end loop;
    return v_created;
end $$;

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.jobs_partitions_ensure(date, integer) from public;
grant execute on function tickq.jobs_partitions_ensure(date, integer) to tickq_worker;
