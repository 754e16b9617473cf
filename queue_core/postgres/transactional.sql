-- Transactional completion (queue_core/postgres/transactional.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: job_complete_in_mark
-- The first half of a completion inside the caller's transaction: mark the running job as
-- completed in it, fenced by its lease token. The update also locks the row until that
-- transaction ends, so no reclaim slips between this check and the finish that follows
-- (jobs_finish_and_claim with limit 0, the one finish rule). No row: the lease was lost.
update tickq.jobs
set completed_in_transaction = true
where id = %(id)s
  and lease_token = %(lease_token)s
  and status in ('waiting', 'queued', 'running', 'retrying')
returning id;
