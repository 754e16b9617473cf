-- A gate row goes with its job: at commit, the job it names exists, live, with the gate's
-- owner. Without this, a gated enqueue that never inserted its job (or named another
-- owner's job as its new id) left a gate row behind, without bound. Deferred, so the gate
-- row may come first in the transaction, as tickq.job_gate's callers write it; only gated
-- enqueues pay for it (one probe of the live jobs' id index).
create or replace function tickq.job_gates_have_jobs() returns trigger
    language plpgsql
    set search_path = pg_catalog, pg_temp
    as $$
begin
    if not exists (select from tickq.jobs j
                   where j.id = new.job_id
                     and j.status in ('waiting', 'queued', 'running', 'retrying')
                     and j.user_id is not distinct from new.user_id) then
        raise exception 'tickq: a gate''s job % was not enqueued by its owner', new.job_id
            using errcode = 'foreign_key_violation';
    end if;
    return null;
end $$;

-- Who may run it (docs/threat-model.md).
revoke all on function tickq.job_gates_have_jobs() from public;
