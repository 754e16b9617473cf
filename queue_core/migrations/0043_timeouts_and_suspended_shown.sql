-- What remains of timeouts: SQL's tickq.enqueue takes a `timeout` by name, as its
-- enqueue_many takes the request field (a new parameter: the function is made again, its
-- grants with it), and the operator's job view returns the job's timeout. And suspended jobs
-- shown as such: the operator's list returns each job's wait_kind, and the operator's
-- counts how many queued jobs are suspended (not runnable depth).

-- Their result types or arguments change, which only dropping them allows; each comes back
-- from its file (schema/functions/), with who may run it.

drop function if exists tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text,
                            double precision, double precision, text, double precision);
drop function tickq.operator_job(uuid);
drop function tickq.operator_stats(timestamptz);
drop function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                                  timestamptz, uuid, integer);
