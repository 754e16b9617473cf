-- Act as tickq_app until this transaction ends, when this login may; true if it did.
-- Per transaction (SET LOCAL), never per session, so a transaction-mode pooler (RDS Proxy,
-- PgBouncer) cannot hand the role to another client's transaction. No SET clause: it
-- would undo the role change when the function returns.
create or replace function tickq.act_as_app() returns boolean
    language plpgsql volatile
    as $$
begin
    perform pg_catalog.set_config('role', 'tickq_app', true);
    return true;
exception when insufficient_privilege then
    return false;
end $$;
