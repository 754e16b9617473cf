-- The session: a user's scope for the transaction, and the application role
-- (queue_core/postgres/executor.py, tickq.functions.app_role).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: user_scope
-- Name the user whose rows this transaction may see (row-level security), and act as
-- tickq_app where the login may, and bound its statements' time when a timeout is given
-- (milliseconds; null keeps the session's): all local to the transaction.
select set_config('tickq.user_id', %(user_id)s, true), tickq.act_as_app(),
       set_config('statement_timeout',
                  coalesce(%(statement_timeout)s::text, current_setting('statement_timeout')),
                  true);

-- name: app_role_enter
-- Act as tickq_app for the rest of this transaction, where the login may.
select tickq.act_as_app();

-- name: app_role_bypass
-- Why the current role would read past row-level security (null: it would not), and who
-- logged in.
select tickq.rls_bypass_reason(), session_user::text;
