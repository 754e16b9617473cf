-- A snooze (a handler's RetryAfter) no longer raises max_attempts to give its attempt back:
-- it takes the attempt back off attempts and is counted here, so a job's attempts and
-- max_attempts say what was run against what was declared.
alter table tickq.jobs add column snoozes integer not null default 0;
alter table tickq.jobs add constraint jobs_snoozes_check check (snoozes >= 0);
