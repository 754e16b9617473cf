-- Two bounds an outside caller could pass.
--
-- A map step's children count against their owner's cap in the queue: a worker enqueues
-- them for the parent's owner, and the parent's handler may map over a list that owner sized,
-- so max_depth_per_owner binds them as it binds the owner's own enqueues (jobs_app_admit).
-- The worker asks tickq.queue_admit_owner in the transaction that enqueues them (beside
-- tickq.queue_admit, in one statement), under the queue limit row's lock.
--
-- Lists of jobs are bounded in bytes whatever the jobs hold: a large payload, result,
-- progress or error history is left out of a list (tickq.list_left_out, decided from the
-- value's header, so the list never reads it), the error is cut, and `truncated` names what
-- was. The operator's list, tickq.operator_jobs, returns that column too: its result type
-- changes, so it is dropped and made again, with its grants (those of policies.sql).

-- Backpressure for a map step's children, which a worker enqueues for the parent's owner: an
-- owner's cap in the queue (max_depth_per_owner) binds them as it binds the owner's own
-- enqueues (jobs_app_admit), since the handler may map over a list the owner sized. Locks
-- the queue's limit row (so concurrent enqueuers of one limited queue take turns), then
-- counts the owner's live jobs in it (waiting, queued, running, retrying: the parent's own
-- row among them) with a fresh snapshot that includes the previous holder's jobs, bounded by
-- the cap + 1 rows however many the owner has. Returns the queue, that count and the cap when
-- the p_count incoming jobs would pass it; no row otherwise, or when the queue caps no owner.
-- Security definer: the count includes rows that row-level security would hide.
create function tickq.queue_admit_owner(p_queue text, p_owner uuid, p_count integer)
    returns table (queue text, depth bigint, max_depth integer)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_cap integer;
begin
    if p_owner is null then
        return;
    end if;
    select l.max_depth_per_owner into v_cap
    from tickq.queue_limits l
    where l.queue = p_queue and l.max_depth_per_owner is not null
    for update;
    if v_cap is null then
        return;
    end if;
    select count(*) into depth
    from (select 1 from tickq.jobs j
          where j.user_id = p_owner and j.queue = p_queue
            and j.status in ('waiting', 'queued', 'running', 'retrying')
          limit v_cap + 1) o;
    if depth + p_count > v_cap then
        queue := p_queue;
        max_depth := v_cap;
        return next;
    end if;
end $$;

revoke all on function tickq.queue_admit_owner(text, uuid, integer) from public;
grant execute on function tickq.queue_admit_owner(text, uuid, integer) to tickq_worker;

-- What a list of jobs leaves out of one JSON value of a job (its payload, result, progress or
-- error history): null when the list shows the value whole, else the bytes it takes as
-- stored, which the list reports in the job's `truncated`. A list shows a value that is
-- small: at most 1024 bytes as stored, stored uncompressed, and at most 1024 bytes as JSON
-- text (1024 is LIST_VALUE_BYTES in queue_core/pages.py). The stored size and the
-- compression are read from the value's header, so a large value, in the TOAST table or
-- compressed in the row (standing for up to some 90 times its stored bytes), is never read;
-- only one small and uncompressed as stored is rendered to be measured (its text can be
-- longer: escapes, long numbers). So a page of jobs reads and sends a bounded size per job,
-- whatever the jobs hold; the job's own view has the value whole.
create function tickq.list_left_out(p_value jsonb) returns integer
    language sql stable parallel safe
    as $$
    select case
        when p_value is null then null
        when pg_column_size(p_value) > 1024 or pg_column_compression(p_value) is not null
            then pg_column_size(p_value)
        when octet_length(p_value::text) > 1024 then pg_column_size(p_value)
    end
$$;

drop function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz,
                                  timestamptz, timestamptz, uuid, integer);

-- Every user's jobs for the operator list: what identifies a job and how it went, never
-- its payload or result. Newest first, a page after the (created_at, id) cursor. As every
-- list of jobs, it leaves out a large progress (null, tickq.list_left_out) and cuts the
-- error to its first 200 characters (LIST_ERROR_CHARS in queue_core/pages.py); `truncated`
-- names what it left out or cut, each with the bytes it holds ({} when nothing). The page's
-- rows are chosen first, so only they are measured.
create function tickq.operator_jobs(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text, status text,
                   attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, run_after timestamptz,
                   created_at timestamptz, updated_at timestamptz, finished_at timestamptz,
                   truncated jsonb)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, case when b.progress is null then j.progress end, left(j.error, 200),
       j.run_after, j.created_at, j.updated_at, j.finished_at,
       jsonb_strip_nulls(jsonb_build_object('progress', b.progress, 'error', b.error))
from (select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts,
             j.max_attempts, j.priority, j.progress, j.error, j.run_after, j.created_at,
             j.updated_at, j.finished_at
      from tickq.jobs j
      where (p_statuses is null or j.status = any(p_statuses))
        and (p_types is null or j.type = any(p_types))
        and (p_queues is null or j.queue = any(p_queues))
        and (p_groups is null or j.group_key = any(p_groups))
        and (p_error is null or strpos(lower(j.error), lower(p_error)) > 0)
        and (p_created_from is null or j.created_at >= p_created_from)
        and (p_created_to is null or j.created_at < p_created_to)
        and (p_after_created is null or (j.created_at, j.id) < (p_after_created, p_after_id))
      order by j.created_at desc, j.id desc
      limit p_limit) j
cross join lateral (
    select tickq.list_left_out(j.progress) as progress,
           case when char_length(j.error) > 200 then octet_length(j.error) end as error) b
order by j.created_at desc, j.id desc
$$;

revoke all on function
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer)
    from public;
grant execute on function
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer)
    to tickq_operator, tickq_worker;
