-- Work off settlements (tickq.jobs_settle, tickq.jobs_settle_pending), at most p_budget
-- children in all, and record what is left in tickq.job_settlements. Each settlement goes
-- through its parent's children in child order after after_child:
-- * a success decrements each waiting child's pending_parents by its counted edge and
--   releases the child when that reaches 0. Children are locked in id order, so parents of
--   one fan-in finishing on several workers at once queue up on the child in one order (no
--   deadlock), and each decrement applies to the count the previous one left: released
--   exactly once.
-- * a failure cancels each waiting child, naming the failed job the settlement descends
--   from (root_id); a cancelled child with children of its own becomes a settlement of its
--   own, worked off before any of a later root, so a descendant reached from several failed
--   jobs is named after the least of them. Descendants are followed through waiting jobs
--   only: a job past waiting has no unfinished parent.
-- p_work comes successes first, then failures by root; the work left (the rest of one
-- settlement's children, and those not reached) is written back, the finished ones deleted.
create or replace function tickq.jobs_settle_run(
    p_work tickq.job_settlements[], p_budget integer, p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_work     tickq.job_settlements[] := p_work;
    v_item     tickq.job_settlements;
    v_children uuid[];
    v_doomed   tickq.job_settlements[];
    v_left     integer := p_budget;
    v_settled  integer := 0;
    v_touched  integer;
    v_done     uuid[] := '{}';
begin
    while cardinality(v_work) > 0 and v_left > 0 loop
        v_item := v_work[1];
        v_work := v_work[2:];
        if v_item.after_child is null then
            select coalesce(array_agg(d.child_id order by d.child_id), '{}') into v_children
            from (select d.child_id from tickq.job_dependencies d
                  where d.parent_id = v_item.parent_id
                  order by d.child_id limit v_left + 1) d;
        else
            select coalesce(array_agg(d.child_id order by d.child_id), '{}') into v_children
            from (select d.child_id from tickq.job_dependencies d
                  where d.parent_id = v_item.parent_id and d.child_id > v_item.after_child
                  order by d.child_id limit v_left + 1) d;
        end if;
        if cardinality(v_children) > v_left then
            -- More than the budget allows: settle a slice, leave the rest for later.
            v_children := v_children[1:v_left];
            v_work := array_prepend(
                row(v_item.parent_id, v_item.status, v_item.root_id, v_item.root_status,
                    v_children[v_left], v_item.user_id, v_item.created_at)::tickq.job_settlements,
                v_work);
        else
            v_done := v_done || v_item.parent_id;
        end if;
        v_left := v_left - cardinality(v_children);

        perform from tickq.jobs c
        where c.id = any(v_children) and c.status = 'waiting'
        order by c.id
        for no key update;

        if v_item.status = 'succeeded' then
            update tickq.jobs c
            set pending_parents = c.pending_parents - 1,
                status = case when c.pending_parents = 1 then 'queued' else 'waiting' end,
                updated_at = p_at
            from tickq.job_dependencies d
            where d.parent_id = v_item.parent_id and d.child_id = c.id and d.counted
              and c.id = any(v_children) and c.status = 'waiting';
            get diagnostics v_touched = row_count;
        else
            with cancelled as (
                update tickq.jobs c
                set status = 'cancelled',
                    error = 'parent ' || v_item.root_id || ' is ' || v_item.root_status,
                    updated_at = p_at,
                    finished_at = p_at
                where c.id = any(v_children) and c.status = 'waiting'
                returning c.id, c.has_children, c.user_id
            )
            select coalesce(array_agg(
                       row(c.id, 'cancelled', v_item.root_id, v_item.root_status, null,
                           c.user_id, p_at)::tickq.job_settlements order by c.id)
                       filter (where c.has_children), '{}'),
                   count(*)
            into v_doomed, v_touched
            from cancelled c;
            -- The cancelled children's descendants next: every settlement left is a failure
            -- of this root or a later one (successes come first), so the list stays ordered.
            v_work := v_doomed || v_work;
        end if;
        v_settled := v_settled + v_touched;
    end loop;

    delete from tickq.job_settlements s where s.parent_id = any(v_done);
    insert into tickq.job_settlements as s
        (parent_id, status, root_id, root_status, after_child, user_id, created_at)
    select w.parent_id, w.status, w.root_id, w.root_status, w.after_child,
           -- A finished parent's owner (the statement that finished it passed none).
           coalesce(w.user_id, (select j.user_id from tickq.jobs j where j.id = w.parent_id)),
           w.created_at
    from unnest(v_work) w
    on conflict (parent_id) do update
        set status = excluded.status, root_id = excluded.root_id,
            root_status = excluded.root_status, after_child = excluded.after_child;
    return v_settled;
end $$;
