-- Code versions and safe deploys: each durable run records the code version it ran under
-- on its job (its last run's) and on each step it stores, which the views of one job show;
-- job.patched(name) leaves a 'patch' marker among the job's step tries; `tickq deploy
-- check` and TICKQ_PIN_VERSION read them.

alter table tickq.jobs add column code_version text;
alter table tickq.jobs add constraint jobs_code_version_check check (
    char_length(code_version) <= 200);

alter table tickq.job_steps add column code_version text;
alter table tickq.job_steps add constraint job_steps_code_version_check check (
    char_length(code_version) <= 200);

alter table tickq.job_step_tries drop constraint job_step_tries_kind_check;
alter table tickq.job_step_tries add constraint job_step_tries_kind_check check (
    kind in ('step', 'undo', 'compensation', 'patch'));

-- The views of one job gain a column: a function's result type changes only by dropping it.
drop function tickq.operator_job_durable(uuid);
drop function tickq.job_durable(uuid);
-- They come back from their files (schema/functions/), with who may run them.
