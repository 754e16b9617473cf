-- The outbox's backlog for the operator console: how many events wait to be published, how
-- long the oldest has waited at p_now (the database clock when null), and the most sends
-- one of them has had. Counts only: operators read no event.
create or replace function tickq.operator_outbox_backlog(p_now timestamptz)
    returns table (pending bigint, oldest_seconds double precision, most_attempts integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select count(*),
       extract(epoch from coalesce(p_now, now()) - min(o.created_at))::double precision,
       coalesce(max(o.attempts), 0)
from tickq.outbox o
where o.published_at is null
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_outbox_backlog(timestamptz) from public;
grant execute on function tickq.operator_outbox_backlog(timestamptz) to tickq_operator, tickq_worker;
