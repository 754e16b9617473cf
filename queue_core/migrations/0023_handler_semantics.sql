-- Handler semantics: which batch handler call a job's last persisted attempt ran in (stored
-- by the finish with that outcome), and whether its success committed in the handler's
-- own transaction. Read only by the views of one job; a plain job keeps nulls in both.

alter table tickq.jobs add column batch_id uuid;
alter table tickq.jobs add column completed_in_transaction boolean;
