-- An application user cancels one of its own jobs: one not yet running at once (with its
-- waiting descendants), a running one asked to stop (tickq.jobs_cancel says how, sagas
-- included). The owner is the transaction's user and the time the database's. Returns the
-- job as it is now. Refused, writing nothing: without a user (SQLSTATE 42501), a job that is
-- not this user's or does not exist (P0002), a job that has finished (TQ410).
create or replace function tickq.cancel(job_id uuid) returns setof tickq.jobs
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner  uuid := tickq.app_user('cancel');
    v_status text;
begin
    return query select * from tickq.jobs_cancel(array[cancel.job_id], now(), v_owner);
    if found then
        return;
    end if;
    select j.status into v_status from tickq.jobs j
    where j.id = cancel.job_id and j.user_id = v_owner;
    if v_status is null then
        raise exception 'tickq: job % not found', cancel.job_id
            using errcode = 'no_data_found', column = 'job_id', detail = cancel.job_id::text;
    end if;
    raise exception 'tickq: cannot cancel job %: it is %', cancel.job_id, v_status
        using errcode = 'TQ410', column = 'job_id', detail = cancel.job_id::text,
              hint = v_status;
end $$;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.cancel(uuid) from public;
grant execute on function tickq.cancel(uuid) to tickq_app, tickq_worker;
