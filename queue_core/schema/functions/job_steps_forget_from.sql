-- Replay from a step: a dead or cancelled job forgets the step p_name and every step stored
-- after it (by finish time, then name, the order its views list them in), with their tries
-- and child links; its compensation and undo records go too, since it runs again. The
-- earlier steps stay, but for those its undos undid. The store's and tickq.retry's (with
-- from_step). Returns the names forgotten; no row: no such step, or the job is not dead or
-- cancelled.
create or replace function tickq.job_steps_forget_from(p_id uuid, p_name text) returns setof text
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id, s.finished_at, s.name
        from tickq.jobs j
        join tickq.job_steps s on s.job_id = j.id and s.name = p_name
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update of j
    ), later as materialized (
        -- And the earlier steps its undos undid: they are no longer in effect.
        select s.name
        from tickq.job_steps s, target
        where s.job_id = target.id
          and ((s.finished_at, s.name) >= (target.finished_at, target.name)
               or exists (select from tickq.job_step_tries t
                          where t.job_id = s.job_id and t.kind = 'undo' and t.name = s.name
                            and t.done_at is not null))
    ), steps as (
        delete from tickq.job_steps s using target
        where s.job_id = target.id and s.name in (select l.name from later l)
    ), tries as (
        delete from tickq.job_step_tries t using target
        where t.job_id = target.id
          and (t.kind = 'compensation' or t.kind = 'undo'
               or (t.kind = 'step' and t.name in (select l.name from later l)))
    ), links as (
        delete from tickq.job_children k using target
        where k.parent_id = target.id and k.step in (select l.name from later l)
    )
    select l.name from later l;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.job_steps_forget_from(uuid, text) from public;
grant execute on function tickq.job_steps_forget_from(uuid, text) to tickq_worker;
