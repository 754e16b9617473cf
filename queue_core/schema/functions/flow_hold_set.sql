-- Keep every job of a key from starting until p_seconds after p_now (null: the database's
-- clock), at most a day (the table's check); a longer hold already set stands.
create or replace function tickq.flow_hold_set(p_key text, p_seconds double precision,
                                               p_now timestamptz)
    returns table (key text, until timestamptz)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
insert into tickq.flow_holds as h (key, until, set_at)
values (p_key, coalesce(p_now, now()) + p_seconds * interval '1 second', coalesce(p_now, now()))
on conflict on constraint flow_holds_pkey do update
    set until = greatest(h.until, excluded.until), set_at = greatest(h.set_at, excluded.set_at)
returning h.key, h.until
$$;

-- The flow limits' operations: operators (the console) and workers (the CLI) call them.
revoke all on function tickq.flow_hold_set(text, double precision, timestamptz) from public;
grant execute on function tickq.flow_hold_set(text, double precision, timestamptz)
    to tickq_operator, tickq_worker;
