-- Lease claimed jobs: the one lease rule of every claim (jobs_finish_and_claim and its
-- several-queue form in queries.sql, tickq.claim_limited, tickq.claim_fair), so the status,
-- the attempt count, the token, the lease's end and the start time are written here alone.
-- The caller has locked p_ids as queued or retrying (FOR UPDATE SKIP LOCKED); p_now is the
-- claim's instant, p_lease_seconds the lease of jobs that name none of their own.
--
-- A fresh token per claim: the first 16 bytes of sha256(this call's random seed, job id)
-- (tickq.lease_token).
-- As unguessable as a random uuid without the seed, and one random draw per call instead of
-- one per job (a build of PostgreSQL without OpenSSL opens /dev/urandom for each draw: a
-- tenth of a batch of 100). The worker draws the seed itself (p_seed, a random uuid per
-- claim statement) and keeps it while the statement is in flight: when the connection dies
-- before the reply arrives, the claim may have committed, and the seed finds those jobs
-- again on the next connection (jobs_claim_recover in queries.sql) instead of leaving
-- them to wait out their lease. Without one (SQL callers), the seed is drawn here.
--
-- The lookup by id names the live partition's statuses, so it reads tickq.jobs_live alone
-- (partition pruning needs a constant) instead of probing the id index of every day of
-- finished jobs; not ('queued', 'retrying'), which matches the predicate of jobs_claim_idx
-- and jobs_fair_idx: after a VACUUM the planner scanned a whole one for 100 ids. Every row
-- looked up is one the caller holds locked as queued or retrying, so it changes no result.
create or replace function tickq.jobs_lease(
    p_ids uuid[], p_lease_seconds integer, p_now timestamptz, p_seed uuid default null)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_seed uuid := coalesce(p_seed, gen_random_uuid());
begin
    return query
    update tickq.jobs j
    set status = 'running',
        -- A job whose attempts are used up yet waits to run (only plain SQL leaves one so)
        -- runs as its last attempt: counting one past max_attempts would break
        -- jobs_attempts_check and fail the claim of every job beside it.
        attempts = least(j.attempts + 1, j.max_attempts),
        lease_token = tickq.lease_token(v_seed, j.id),
        lease_until = p_now + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
        started_at = p_now,
        updated_at = p_now
    where j.id = any(p_ids) and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.*;
end $$;
