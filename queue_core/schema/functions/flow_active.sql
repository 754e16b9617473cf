-- Whether any flow limit or live hold exists: without one the claims never read flow keys
-- (limits_configured). Security definer, so a login that may not read the holds (the
-- application's: they name other owners' keys) learns this one bit and nothing more.
create function tickq.flow_active() returns boolean
    language sql stable
    security definer
    set search_path = pg_catalog, pg_temp
    as $$
    select exists (select from tickq.flow_limits)
           or exists (select from tickq.flow_holds h where h.until > now())
$$;
