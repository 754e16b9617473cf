-- Work off settlements left by the statements that finished their parents
-- (tickq.jobs_settle): at most p_budget children, in one short transaction, from the
-- settlements no other worker holds (SKIP LOCKED), oldest first, so no settlement waits
-- behind later ones however many there are; of one age, successes first, then by root, as
-- tickq.jobs_settle_run takes them. Returns the children settled; 0 when none is left.
create or replace function tickq.jobs_settle_pending(p_budget integer, p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
begin
    return tickq.jobs_settle_run(
        array(select s from tickq.job_settlements s
              order by s.created_at, s.status <> 'succeeded', s.root_id, s.parent_id
              limit 100
              for update skip locked),
        p_budget, coalesce(p_at, now()));
end $$;
