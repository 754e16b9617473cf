-- The attempts a job that is to end dead or cancelled away from its handler (the reclaim, a
-- cancel while it does not run) must be left so that its undos run first: 0 when none of
-- its stored steps has an undo (it ends as any job), its compensable steps x 5 + 1 (5: the
-- tries of one undo, UNDO_TRIES in queue_core/model/steps.py) when it owes them, and null when
-- its compensation has begun already (it is not begun twice). Callers test the job row
-- first (a claimed or resumed job), so a job that never stored a step reads no other table.
create or replace function tickq.job_compensation_spare(p_id uuid) returns integer
    language sql stable
    as $$
    select case when exists (select from tickq.job_step_tries t
                             where t.job_id = p_id and t.kind = 'compensation')
                then null
                else coalesce(nullif((select count(*)::integer from tickq.job_steps s
                                      where s.job_id = p_id and s.compensable), 0) * 5 + 1, 0)
           end
$$;
