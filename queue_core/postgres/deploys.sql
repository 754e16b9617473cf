-- What `tickq deploy check` and `deploy drained` read: the stored histories of unfinished
-- durable jobs, and a code version's unfinished jobs (queue_core/postgres/deploys.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: job_histories_unfinished
-- The stored histories of unfinished durable jobs of the given types, for `tickq deploy
-- check` (queue_core/runner/replay.py): each job's row, the code version its last run ran under,
-- its steps in the order they were stored (name and result: a replay returns them) and
-- the patches marked on it, what it waits for and its steps that retry (where its last run
-- stopped). Durable: it stored a step, suspended or marked a patch. Read in a read-only
-- transaction; ordered by id so that a report is stable.
select {{job_columns}}, j.code_version,
       (select coalesce(jsonb_agg(jsonb_build_array(s.name, s.result)
                                  order by s.finished_at, s.name), '[]'::jsonb)
        from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(array_agg(t.name order by t.name), '{}'::text[])
        from tickq.job_step_tries t where t.job_id = j.id and t.kind = 'patch'),
       j.wait_kind, j.wait_name,
       (select coalesce(array_agg(t.name order by t.at, t.name), '{}'::text[])
        from tickq.job_step_tries t where t.job_id = j.id and t.kind = 'step')
from tickq.jobs j
where j.type = any(%(types)s::text[])
  and j.status in ('queued', 'waiting', 'retrying', 'running')
  and (j.resumes > 0 or j.wait_kind is not null
       or exists (select from tickq.job_steps s where s.job_id = j.id)
       or exists (select from tickq.job_step_tries t where t.job_id = j.id))
order by j.id;

-- name: jobs_unfinished_of_version
-- How many unfinished jobs last ran under the code version %(code_version)s, by status, for
-- `tickq deploy drained`: a pinned version's workers may stop once it is none.
select status, count(*)
from tickq.jobs
where code_version = %(code_version)s::text
  and status in ('queued', 'waiting', 'retrying', 'running')
group by status
order by status;
