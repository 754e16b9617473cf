-- Keep a signal for a live job and wake it when it waits for that name: the store's and
-- tickq.signal's. The job row is locked first and written (its `signals`), so a suspension
-- racing this signal either commits first and is woken here, or waits for this commit and
-- sees the name. Returns the status of the job, whether the name was taken, the signal
-- bytes and count it holds, whether this signal was kept and whether it woke the job; no
-- row: no such job.
create or replace function tickq.job_signals_send(
    p_id uuid,
    p_name text,
    p_payload jsonb,
    p_size integer,
    p_max_bytes integer,
    p_max_signals integer,
    p_now timestamptz
) returns table (status text, taken boolean, bytes bigint, held bigint, kept boolean,
                 woke boolean)
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with job as materialized (
        select j.id, j.status from tickq.jobs j where j.id = p_id for update
    ), counted as materialized (
        select coalesce(sum(s.size), 0)::bigint as bytes,
               coalesce(bool_or(s.name = p_name), false) as taken,
               count(*) as held
        from tickq.job_signals s where s.job_id = p_id
    ), sent as (
        insert into tickq.job_signals (job_id, name, payload, size, sent_at)
        select job.id, p_name, p_payload, p_size, p_now
        from job, counted
        where job.status not in ('succeeded', 'dead', 'cancelled')
          and not counted.taken and counted.bytes + p_size <= p_max_bytes
          and counted.held < p_max_signals
        -- The same name sent concurrently: the later one finds the key taken and keeps none.
        on conflict (job_id, name) do nothing
        returning job_id
    ), woken as (
        update tickq.jobs j
        set signals = array_append(coalesce(j.signals, '{}'::text[]), p_name),
            run_after = case when j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
                                  and j.wait_name = p_name
                             then least(j.run_after, p_now) else j.run_after end,
            updated_at = p_now
        from sent
        where j.id = sent.job_id
        returning j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
                  and j.wait_name = p_name as woke
    )
    select job.status, counted.taken, counted.bytes, counted.held, exists (select from sent),
           coalesce((select w.woke from woken w), false)
    from job, counted;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz) from public;
grant execute on function tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz) to tickq_worker;
