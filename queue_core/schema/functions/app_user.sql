-- The transaction's user for one of the application login's functions (tickq.enqueue_many,
-- tickq.cancel, tickq.retry, tickq.signal): the owner of everything it touches, taken from
-- the session, never from an argument. Refuses (SQLSTATE 42501) when no user is named.
create or replace function tickq.app_user(p_action text) returns uuid
    language plpgsql stable
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_user uuid := tickq.current_user_id();
begin
    if v_user is null then
        raise exception 'tickq: an application''s % needs the transaction''s user', p_action
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    return v_user;
end $$;
