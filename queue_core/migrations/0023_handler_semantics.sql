-- Handler semantics: which batch handler call a job was last handed to, and whether its
-- success committed in the handler's own transaction. Read only by the views of one job;
-- a plain job keeps nulls in both, so neither the claim nor the finish changes.

alter table tickq.jobs add column batch_id uuid;
alter table tickq.jobs add column completed_in_transaction boolean;
