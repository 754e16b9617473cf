-- The `Job Dead` event of a job that becomes dead (trigger jobs_outbox_dead, triggers.sql),
-- in the outbox in the same transaction: an EventBridge outage delays it, never loses it.
-- The detail is what the event always carried (id, type, queue, attempts, error), the
-- counts as the job's views show them (queue_core/model/jobs.py): attempts the job's own,
-- max_attempts as declared, a saga's compensation's runs apart (a compensation raises
-- max_attempts for its undos); the publisher adds the event's id. Security definer: the insert is the schema owner's, so a
-- path to dead that an application's transaction takes still writes it, while
-- applications may not write tickq's own events themselves (policies.sql).
create or replace function tickq.outbox_job_dead() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.outbox (job_id, user_id, detail_type, detail)
    values (new.id, new.user_id, 'Job Dead', jsonb_build_object(
        'id', new.id, 'type', new.type, 'queue', new.queue,
        'attempts', least(new.attempts, coalesce(new.compensation_attempts, new.attempts)),
        'max_attempts', coalesce(new.declared_max_attempts, new.max_attempts),
        'compensation_runs',
        greatest(new.attempts - coalesce(new.compensation_attempts, new.attempts), 0),
        'error', left(new.error, 4000)));
    return new;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.outbox_job_dead() from public;
