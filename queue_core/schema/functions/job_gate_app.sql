-- An application's debounced or throttled enqueue (the API's, tickq.enqueue on the
-- application role): tickq.job_gate for the transaction's user, at the database's clock.
-- The application role may not execute tickq.job_gate itself, which takes an owner and a
-- clock as arguments for the workers: with it, a login that names no user could rewrite
-- another owner's debounced payload or store a time the engine cannot read. Refuses
-- (SQLSTATE 42501) when no user is named.
create function tickq.job_gate_app(
    p_kind text,
    p_key text,
    p_seconds double precision,
    p_max_seconds double precision,
    p_payload jsonb,
    p_new_id uuid,
    out job_id uuid,
    out outcome text,
    out run_after timestamptz
) returns record
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_user uuid := tickq.current_user_id();
begin
    if v_user is null then
        raise exception 'tickq: an application''s gated enqueue needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    select g.job_id, g.outcome, g.run_after into job_id, outcome, run_after
    from tickq.job_gate(p_kind, p_key, v_user, p_seconds, p_max_seconds, p_payload, null,
                        p_new_id) g;
end $$;
