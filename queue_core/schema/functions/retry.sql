-- An application user sends one of its own dead or cancelled jobs back to the queue with
-- fresh attempts (tickq.jobs_retry): keeping its completed steps (it resumes where it
-- failed, but for the steps its undos undid), or forgetting them all (fresh), or the step
-- from_step and every step stored after it. The owner is the transaction's user and the time
-- the database's. Returns the job as it is now. Refused, writing nothing: without a user
-- (SQLSTATE 42501), a job that is not this user's or does not exist (P0002), a job that is
-- not dead or cancelled, has a parent that has not succeeded or whose idempotency key a live
-- job holds (TQ410), fresh with from_step or an unknown step (22023).
create or replace function tickq.retry(job_id uuid, fresh boolean default false,
                            from_step text default null)
    returns setof tickq.jobs
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner  uuid := tickq.app_user('retry');
    v_status text;
    v_parent record;
begin
    select j.status into v_status from tickq.jobs j
    where j.id = retry.job_id and j.user_id = v_owner
    for update;
    if v_status is null then
        raise exception 'tickq: job % not found', retry.job_id
            using errcode = 'no_data_found', column = 'job_id', detail = retry.job_id::text;
    end if;
    if v_status not in ('dead', 'cancelled') then
        raise exception 'tickq: cannot retry job %: it is %', retry.job_id, v_status
            using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
                  hint = v_status;
    end if;
    if coalesce(retry.fresh, false) and retry.from_step is not null then
        raise exception 'tickq: give either fresh or from_step, not both'
            using errcode = 'invalid_parameter_value', column = 'from_step';
    end if;
    if coalesce(retry.fresh, false) then
        perform tickq.job_durable_clear(retry.job_id);
    elsif retry.from_step is not null then
        if char_length(retry.from_step) not between 1 and 128 then
            raise exception 'tickq: from_step must be 1-128 characters long'
                using errcode = 'invalid_parameter_value', column = 'from_step';
        end if;
        if not exists (select from tickq.job_steps_forget_from(retry.job_id, retry.from_step))
        then
            raise exception 'tickq: job % has no step %', retry.job_id,
                quote_literal(retry.from_step)
                using errcode = 'invalid_parameter_value', column = 'from_step';
        end if;
    else
        perform tickq.job_compensation_clear(retry.job_id);
    end if;
    return query select * from tickq.jobs_retry(array['dead', 'cancelled'],
                                                array[retry.job_id], null, null, 1, now(),
                                                v_owner);
    if found then
        return;
    end if;
    select p.id, p.status into v_parent
    from tickq.job_dependencies d join tickq.jobs p on p.id = d.parent_id
    where d.child_id = retry.job_id and p.status <> 'succeeded'
    limit 1;
    if v_parent.id is not null then
        raise exception 'tickq: cannot retry (its parent % is %) job %: it is %',
            v_parent.id, v_parent.status, retry.job_id, v_status
            using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
                  hint = v_status;
    end if;
    raise exception 'tickq: cannot retry (its idempotency key is held by a live job) job %: '
                    'it is %', retry.job_id, v_status
        using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
              hint = v_status;
end $$;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.retry(uuid, boolean, text) from public;
grant execute on function tickq.retry(uuid, boolean, text) to tickq_app, tickq_worker;
