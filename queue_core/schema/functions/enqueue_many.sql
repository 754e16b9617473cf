-- The application login's way to add jobs (the HTTP API's and EnqueueFunction's outside
-- callers' too): a JSON array of requests as the HTTP API takes them (tickq.enqueue_job says
-- which fields), each written for the transaction's user (tickq.current_user_id()) and on the
-- database's clock, never an owner, a time or an id the caller chose. A request's "after"
-- names job ids or the positions of earlier requests of the same call (the jobs those landed
-- on), so a whole graph goes in one call. All or nothing: the first bad request refuses the
-- call (SQLSTATE 22023 naming the field and the request, TQ404 for a parent, TQ429 for a full
-- queue) and nothing is written. Without a user, SQLSTATE 42501.
--
-- Returns one row per request, in order: its position, the job's id and status, and the
-- outcome (created, duplicate, debounced, throttled). field_names renames fields in the
-- errors' column names (tickq.enqueue names its own parameters).
create or replace function tickq.enqueue_many(jobs jsonb, field_names jsonb default '{}')
    returns table (request integer, id uuid, status text, outcome text)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner uuid := tickq.app_user('enqueue');
    v_max   integer := (tickq.enqueue_bounds() ->> 'max_batch')::integer;
    v_ids   uuid[] := '{}';
    v_job   jsonb;
    v_ref   jsonb;
    v_after uuid[];
    v_one   uuid;
    v_row   record;
    -- Plain requests, checked, waiting to go in together (tickq.enqueue_job's p_defer).
    v_rows  tickq.jobs[] := '{}';
begin
    if jsonb_typeof(enqueue_many.jobs) is distinct from 'array'
       or jsonb_array_length(enqueue_many.jobs) not between 1 and v_max then
        raise exception 'tickq: jobs must be a JSON array of 1-% requests', v_max
            using errcode = 'invalid_parameter_value', column = 'jobs';
    end if;
    request := 0;
    for v_job in select e from jsonb_array_elements(enqueue_many.jobs) e loop
        v_after := '{}';
        v_ref := case when jsonb_typeof(v_job) = 'object' then v_job -> 'after' end;
        if v_ref is not null and jsonb_typeof(v_ref) <> 'null' then
            if jsonb_typeof(v_ref) <> 'array' then
                raise exception 'tickq: job %: after must be a list of job ids', request
                    using errcode = 'invalid_parameter_value', column = 'after';
            end if;
            for v_ref in select e from jsonb_array_elements(v_ref) e loop
                if jsonb_typeof(v_ref) = 'number' and v_ref::numeric = trunc(v_ref::numeric)
                   and v_ref::numeric between 0 and request - 1 then
                    v_one := v_ids[v_ref::integer + 1];
                elsif jsonb_typeof(v_ref) = 'string'
                      and (v_ref #>> '{}') ~* '^[0-9a-f]{8}-?([0-9a-f]{4}-?){3}[0-9a-f]{12}$' then
                    v_one := (v_ref #>> '{}')::uuid;
                else
                    raise exception 'tickq: job %: after must name job ids or positions of '
                                    'earlier requests (0-%), got %', request, request - 1,
                        left(v_ref::text, 60)
                        using errcode = 'invalid_parameter_value', column = 'after';
                end if;
                if not v_one = any(v_after) then
                    v_after := v_after || v_one;
                end if;
            end loop;
        end if;
        if cardinality(v_after) > 0 then
            -- Its parents may be earlier requests: they go in first.
            perform tickq.enqueue_rows(v_rows);
            v_rows := '{}';
        end if;
        select e.id, e.status, e.outcome, e.deferred into v_row
        from tickq.enqueue_job(v_owner, v_job, v_after,
                               case when jsonb_array_length(enqueue_many.jobs) > 1
                                    then request end,
                               coalesce(enqueue_many.field_names, '{}'), true) e;
        if (v_row.deferred).id is not null then
            v_rows := v_rows || v_row.deferred;
        end if;
        v_ids := v_ids || v_row.id;
        id := v_row.id;
        status := v_row.status;
        outcome := v_row.outcome;
        return next;
        request := request + 1;
    end loop;
    perform tickq.enqueue_rows(v_rows);
end $$;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.enqueue_many(jsonb, jsonb) from public;
grant execute on function tickq.enqueue_many(jsonb, jsonb) to tickq_app, tickq_worker;
