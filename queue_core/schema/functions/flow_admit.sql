-- Which of a claim's candidates (p_ids, locked by the caller as queued or retrying, best
-- first) their flow keys let start at p_now, in that order: a job starts when none of its
-- keys is held and each governed key stays within its cap of running jobs and its rate.
-- Also the keys that may start no more (for the caller's next pass to look past).
--
-- Each governed key is locked for the rest of the transaction (an advisory lock on the
-- key: no row that every claim of a busy key rewrites); a key another claimer holds is
-- skipped, never waited for, so claims locking keys in different passes cannot deadlock.
-- Counts are read after the locks, with the fresh snapshot a volatile function's statement
-- takes, so they see every claim the previous holder committed: running + started never
-- exceeds a cap. The running jobs are counted, not a counter: a reclaimed lease frees its
-- key. Starts are counted from p_now back one period, with no upper bound, and logged at
-- p_now (tickq.flow_log): any window of the period then holds at most the rate.
create or replace function tickq.flow_admit(
    p_ids uuid[], p_now timestamptz, out admitted uuid[], out blocked text[])
    returns record
    language plpgsql volatile
    as $$
declare
    v_keys    text[];
    v_max     integer[];
    v_rate    integer[];
    v_period  double precision[];
    v_used    integer[];
    v_started integer[];
    v_held    text[];
    v_job     record;
    v_ok      boolean;
    v_at      integer;
    v_key     text;
begin
    admitted := '{}';
    -- The governed keys among the candidates', in one global order.
    select coalesce(array_agg(k.key order by k.key), '{}'),
           coalesce(array_agg(g.max_running order by k.key), '{}'),
           coalesce(array_agg(g.rate_limit order by k.key), '{}'),
           coalesce(array_agg(g.rate_period_seconds order by k.key), '{}')
    into v_keys, v_max, v_rate, v_period
    from (select distinct k as key
          from tickq.jobs j, unnest(j.flow_keys) k
          where j.id = any(p_ids) and j.status in ('waiting', 'queued', 'running', 'retrying'))
        k
    cross join lateral tickq.flow_limit_of(k.key) g;
    -- A key another claimer holds starts nothing in this claim.
    for i in 1 .. cardinality(v_keys) loop
        if not pg_try_advisory_xact_lock(hashtextextended('tickq.flow:' || v_keys[i], 0)) then
            v_max[i] := 0;
        end if;
    end loop;
    select coalesce(array_agg(coalesce(r.n, 0) order by k.ord), '{}'),
           coalesce(array_agg(coalesce(s.n, 0) order by k.ord), '{}')
    into v_used, v_started
    from unnest(v_keys, v_period) with ordinality k (key, period, ord)
    left join lateral (select count(*)::integer as n from tickq.jobs j
                       where j.status = 'running' and j.flow_keys @> array[k.key]) r on true
    left join lateral (select count(*)::integer as n from tickq.flow_starts f
                       where k.period is not null and f.key = k.key
                         and f.at > p_now - k.period * interval '1 second') s on true;
    select coalesce(array_agg(h.key), '{}') into v_held
    from tickq.flow_holds h
    where h.until > p_now
      and h.key in (select k from tickq.jobs j, unnest(j.flow_keys) k
                    where j.id = any(p_ids)
                      and j.status in ('waiting', 'queued', 'running', 'retrying'));

    -- Greedy, in the candidates' order: each job takes a slot of each of its keys.
    for v_job in
        select c.id, j.flow_keys
        from unnest(p_ids) with ordinality c (id, ord)
        join tickq.jobs j
            on j.id = c.id and j.status in ('waiting', 'queued', 'running', 'retrying')
        order by c.ord
    loop
        v_ok := not (v_job.flow_keys && v_held);
        if v_ok then
            foreach v_key in array v_job.flow_keys loop
                v_at := array_position(v_keys, v_key);
                continue when v_at is null;
                if v_used[v_at] >= coalesce(v_max[v_at], 2147483647)
                   or v_started[v_at] >= coalesce(v_rate[v_at], 2147483647) then
                    v_ok := false;
                end if;
            end loop;
        end if;
        continue when not v_ok;
        admitted := admitted || v_job.id;
        foreach v_key in array v_job.flow_keys loop
            v_at := array_position(v_keys, v_key);
            continue when v_at is null;
            v_used[v_at] := v_used[v_at] + 1;
            v_started[v_at] := v_started[v_at] + 1;
        end loop;
    end loop;

    blocked := v_held || array(
        select k.key from unnest(v_keys, v_max, v_rate, v_used, v_started) k (key, m, r, u, s)
        where u >= coalesce(m, 2147483647) or s >= coalesce(r, 2147483647));
end $$;

-- The flow limits' rules: the claims (which run as the worker) call them; nobody else.
revoke all on function tickq.flow_admit(uuid[], timestamptz) from public;
grant execute on function tickq.flow_admit(uuid[], timestamptz) to tickq_worker;
