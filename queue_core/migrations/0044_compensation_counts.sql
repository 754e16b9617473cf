-- Counts that mean what they say: a saga's compensation raises max_attempts so a reclaim
-- cannot end it before its undos, and the job's views showed the raised number and the
-- compensation's runs as attempts. The columns keep what was declared and where the
-- compensation began, so the views show the declared max_attempts and the compensation's
-- runs apart; the engine keeps reading the raised max_attempts.

alter table tickq.jobs add column declared_max_attempts integer;
alter table tickq.jobs add column compensation_attempts integer;

alter table tickq.jobs add constraint jobs_compensation_counts_check check (
    declared_max_attempts between 1 and max_attempts
    and compensation_attempts between 0 and max_attempts);

-- The operator's job views return the compensation's runs: their result types change,
-- which only dropping them allows (if exists: 0043 dropped them too, and the files come back
-- only after every migration); each comes back from its file (schema/functions/), with who
-- may run it.
drop function if exists tickq.operator_job(uuid);
drop function if exists tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz,
                                            timestamptz, timestamptz, uuid, integer);
