-- At most 100 signals per job, however an application user inserts them (the API's send
-- checks it first, with the same clear error): a job's signals are on every view of it.
create or replace function tickq.job_signals_app_admit() returns trigger
    language plpgsql volatile
    as $$
begin
    if (select count(*)
        from (select 1 from tickq.job_signals s where s.job_id = new.job_id limit 101) n)
       > 100 then
        raise exception 'tickq: a job holds at most 100 signals'
            using errcode = 'TQ422', detail = 'signal';
    end if;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_signals_app_admit() from public;
