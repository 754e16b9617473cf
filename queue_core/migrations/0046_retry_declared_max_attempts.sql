-- A retry gives a saga that compensated its declared max_attempts back (tickq.jobs_retry):
-- the attempts its compensation added were for the undos, not for the runs from scratch a
-- retry gives. Jobs retried before kept the raised max_attempts (their declared one beside
-- it, compensation_attempts null, as only a retry leaves them); those still to run that
-- have not spent their declared attempts get it back now. The function comes back from its
-- file after the migrations.

update tickq.jobs
set max_attempts = declared_max_attempts,
    declared_max_attempts = null
where declared_max_attempts is not null
  and compensation_attempts is null
  and status in ('waiting', 'queued', 'running', 'retrying')
  and attempts <= declared_max_attempts;
