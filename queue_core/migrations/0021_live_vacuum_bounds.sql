-- The live partition's autovacuum triggers on a fixed count of dead (and inserted) row
-- versions instead of a share of the table, and its TOAST table is vacuumed as eagerly as
-- its heap. A queue's dead tuples come at the pace of its throughput (two per job: the
-- claim's old version and the finish that moves the row out), not of its size: a share of
-- the row estimate lets a past backlog, or a few live rows, decide when vacuum comes. Large
-- payloads and results live in the TOAST table, which churns with the heap (a finish that
-- moves a row out deletes its chunks) and kept the stock 20 % and the throttled vacuum.
alter table tickq.jobs_live set (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000,
    toast.autovacuum_vacuum_scale_factor = 0,
    toast.autovacuum_vacuum_threshold = 1000,
    toast.autovacuum_vacuum_insert_scale_factor = 0,
    toast.autovacuum_vacuum_insert_threshold = 1000,
    toast.autovacuum_vacuum_cost_delay = 0
);
