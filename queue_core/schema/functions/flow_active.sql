-- Whether any flow limit or live hold exists: without one the claims never read flow keys
-- (limits_configured). Security definer, so a login that may not read the holds (the
-- application's: they name other owners' keys) learns this one bit and nothing more.
create or replace function tickq.flow_active() returns boolean
    language sql stable
    security definer
    set search_path = pg_catalog, pg_temp
    as $$
    select exists (select from tickq.flow_limits)
           or exists (select from tickq.flow_holds h where h.until > now())
$$;

-- Whether any flow limit or hold exists, and what holds one's own job back: applications
-- and workers (an application reads no flow table).
revoke all on function tickq.flow_active() from public;
grant execute on function tickq.flow_active() to tickq_app, tickq_worker;
