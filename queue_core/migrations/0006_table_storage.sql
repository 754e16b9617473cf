-- Wake long-running workers when jobs arrive. One notification per insert statement (not
-- per row), so a bulk enqueue of thousands costs one; PostgreSQL also folds identical
-- notifications of one transaction into one. Only `tickq work` listens: Lambda ticks never
-- LISTEN (RDS Proxy would pin their connections), they are driven by their schedule.
create function tickq.notify_jobs_enqueued() returns trigger
    language plpgsql
    as $$
begin
    perform pg_notify('tickq_jobs', '');
    return null;
end
$$;

create trigger jobs_notify_enqueued
    after insert on tickq.jobs
    for each statement
    execute function tickq.notify_jobs_enqueued();

-- Storage settings of the queue table, chosen by `python -m bench.table_health` (1M jobs
-- through enqueue -> claim -> finish; figures in docs/benchmarks.md):
-- * Every job leaves two dead row versions (claim, finish), and none of those updates can be
--   HOT: status and lease_until are index keys or partial-index predicates, so the
--   measurement saw 0 HOT updates out of 2M. A fillfactor below 100 would only spread live
--   rows over more pages; it stays at 100.
-- * Vacuum as soon as 1% of the table is dead instead of 20%, unthrottled (the dead tuples
--   sit at the hot end of the claim index, and a throttled vacuum on a busy queue never
--   catches up). Measured: more vacuums, fewer dead tuples and a smaller heap after the
--   churn, with no loss of throughput. The server's autovacuum_naptime still bounds how
--   often vacuum comes back (see docs/operations.md).
alter table tickq.jobs set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
