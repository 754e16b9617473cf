-- A deleted job takes the rows that hang on it (its key, steps, step tries, signals,
-- dependency edges, settlement, gate and workflow children), as foreign keys' cascades
-- would (a partitioned tickq.jobs cannot be referenced by id alone): one list of tables,
-- the same as tickq.jobs_forget_all and tickq.jobs_partition_drop empty
-- (tests/unit/test_job_tables.py holds the three to it). A statement trigger with the
-- deleted rows (jobs_forget, triggers.sql): one set-based delete per table and statement,
-- and nothing at all for statements that delete no job. Security definer, as a cascade:
-- the rows go whoever deleted the job. Key rows are found by key (keyless deleted jobs
-- match none).
create or replace function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    delete from tickq.job_settlements x using gone g
    where x.parent_id = g.id and g.has_children;  -- only a parent has one
    delete from tickq.job_gates x using gone g where x.job_id = g.id;
    delete from tickq.job_step_tries t using gone g where t.job_id = g.id;
    delete from tickq.job_ids i using gone g where i.id = g.id;
    -- A workflow's children go with their parent (this trigger fires again for them; a
    -- statement trigger fires even when it deletes nothing, hence the test first).
    if exists (select from tickq.job_children k join gone g on g.id = k.parent_id) then
        delete from tickq.jobs c
        where c.id in (select k.child_id from tickq.job_children k join gone g
                       on g.id = k.parent_id);
    end if;
    delete from tickq.job_children k using gone g
    where k.parent_id = g.id or k.child_id = g.id;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.jobs_forget() from public;
