"""What the storage benchmarks share: the state of `tickq.jobs` read over its whole partition
tree, finished jobs made in bulk, and the engine's partition maker when it has one.

Everything here is plain SQL that holds whether `tickq.jobs` is one table or a partitioned
table: the storage tables are the leaves of `pg_partition_tree('tickq.jobs')`, or the table
itself when it has no partitions (the tree of a plain table is empty), so summing over them
measures either shape, and no index or partition is named.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg

import queue_core
from queue_core.policies import retention

LEAVES = """
select relid from pg_partition_tree('tickq.jobs') where isleaf
union all
select 'tickq.jobs'::regclass where not exists (select from pg_partition_tree('tickq.jobs'))
"""

TREE_STATS = f"""
select count(*),
       coalesce(sum(s.n_live_tup), 0), coalesce(sum(s.n_dead_tup), 0),
       coalesce(sum(s.n_tup_ins), 0), coalesce(sum(s.n_tup_upd), 0),
       coalesce(sum(s.n_tup_hot_upd), 0), coalesce(sum(s.n_tup_del), 0),
       coalesce(sum(s.vacuum_count + s.autovacuum_count), 0),
       coalesce(sum(pg_relation_size(t.relid)), 0),
       coalesce(sum(pg_indexes_size(t.relid)), 0),
       coalesce(sum(pg_total_relation_size(t.relid)), 0)
from ({LEAVES}) t
left join pg_stat_user_tables s on s.relid = t.relid
"""
TREE_STAT_NAMES = (
    "storage_tables",
    "live_tuples",
    "dead_tuples",
    "inserted",
    "updated",
    "hot_updated",
    "deleted",
    "vacuums",
    "heap_bytes",
    "index_bytes",
    "total_bytes",
)

# Each index of the tree by its top-level name: a partitioned index sums its partitions'.
INDEX_SIZES = f"""
select coalesce(pg_partition_root(i.indexrelid), i.indexrelid)::regclass::text,
       sum(pg_relation_size(i.indexrelid))
from pg_index i
where i.indrelid in ({LEAVES})
group by 1
order by 1
"""

# Every table of the schema with its indexes and TOAST: tables beside the jobs (steps,
# dependencies, a key table if the storage has one) count too.
SCHEMA_BYTES = """
select coalesce(sum(pg_total_relation_size(c.oid)), 0)
from pg_class c
where c.relnamespace = 'tickq'::regnamespace and c.relkind in ('r', 'm')
"""

# Finished jobs written directly, as the engine leaves them: `succeeded` with one attempt,
# every 20th `cancelled` before it ran, every 100th `dead` after its three attempts, the
# lease cleared, timestamps in order. `finished_at` spreads evenly over [since, until).
INSERT_FINISHED = """
insert into tickq.jobs (
    type, status, attempts, max_attempts, error, errors, run_after, created_at, updated_at,
    started_at, finished_at)
select 'noop', s.status, s.attempts, 3, s.error, s.errors, f.at - interval '1 second',
       f.at - interval '1 second', f.at, case when s.attempts > 0 then f.at end, f.at
from generate_series(%(first)s::bigint, %(last)s::bigint) i
cross join lateral (
    select %(since)s::timestamptz
           + (%(until)s::timestamptz - %(since)s::timestamptz) * ((i - 1)::float8 / %(total)s) as at
) f
cross join lateral (
    select case when i %% 100 = 0 then 'dead' when i %% 20 = 0 then 'cancelled'
                else 'succeeded' end as status,
           case when i %% 100 = 0 then 3 when i %% 20 = 0 then 0 else 1 end as attempts,
           case when i %% 100 = 0 then 'boom' end as error,
           case when i %% 100 = 0 then '[{"error": "boom"}]'::jsonb
                else '[]'::jsonb end as errors
) s
"""
INSERT_CHUNK = 100_000

# Names the engine may give the function that creates time partitions ahead of time,
# looked up on these modules; today's single table has none of them.
PARTITION_MAKER_NAMES = ("ensure_partitions", "create_partitions")
PARTITION_MAKER_MODULES = (queue_core, retention)


def tree_stats(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Tuples, updates, vacuums and bytes of tickq.jobs summed over every storage table
    under it, each index's size, and the whole schema's bytes."""
    conn.execute("select pg_stat_force_next_flush()")
    row = conn.execute(TREE_STATS).fetchone()
    assert row is not None
    stats: dict[str, Any] = {k: int(v) for k, v in zip(TREE_STAT_NAMES, row, strict=True)}
    stats["index_bytes_by_index"] = {
        name: int(size) for name, size in conn.execute(INDEX_SIZES).fetchall()
    }
    schema = conn.execute(SCHEMA_BYTES).fetchone()
    assert schema is not None
    stats["schema_bytes"] = int(schema[0])
    rows = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert rows is not None
    stats["rows"] = int(rows[0])  # exact, where live_tuples is the statistics' estimate
    return stats


def set_storage_options(conn: psycopg.Connection[Any], options: str) -> int:
    """Apply storage options (constant text, never user input) to each storage table of
    tickq.jobs existing now; a partitioned parent takes none itself. Returns how many."""
    leaves = [row[0] for row in conn.execute(f"select relid::regclass::text from ({LEAVES}) t")]
    for table in leaves:
        conn.execute(f"alter table {table} set ({options})")
    return len(leaves)


def reset_storage_options(conn: psycopg.Connection[Any], names: str) -> None:
    """Back to the server's defaults for these options on every storage table."""
    for (table,) in conn.execute(f"select relid::regclass::text from ({LEAVES}) t").fetchall():
        conn.execute(f"alter table {table} reset ({names})")


def wal_lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("select pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def wal_bytes_since(conn: psycopg.Connection[Any], lsn: str) -> int:
    """WAL the whole server wrote since `lsn` (the benchmark's database is its only writer)."""
    row = conn.execute("select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)", (lsn,))
    value = row.fetchone()
    assert value is not None
    return int(value[0])


def partition_maker() -> tuple[str, Callable[..., Any]] | None:
    """The engine's partition-creating function and its name, or None (a single table)."""
    for module in PARTITION_MAKER_MODULES:
        for name in PARTITION_MAKER_NAMES:
            maker = getattr(module, name, None)
            if callable(maker):
                return f"{module.__name__}.{name}", maker
    return None


def partition_maker_name() -> str | None:
    """What the results record: which partition maker ran, or None (a single table)."""
    found = partition_maker()
    return None if found is None else found[0]


def make_partitions(conn: psycopg.Connection[Any], since: datetime, until: datetime) -> str | None:
    """Have the engine create the partitions for finish times in [since, until), if it makes
    partitions; returns the function's name, or None when there is none to call.

    The maker gets the connection and, among `since`, `until` and `now`, the keyword
    arguments its signature names.
    """
    found = partition_maker()
    if found is None:
        return None
    name, maker = found
    offered = {"since": since, "until": until, "now": until}
    accepted = inspect.signature(maker).parameters
    maker(conn, **{k: v for k, v in offered.items() if k in accepted})
    return name


def insert_finished(
    conn: psycopg.Connection[Any], rows: int, since: datetime, until: datetime
) -> None:
    """Insert `rows` finished jobs through tickq.jobs, finish times spread over [since,
    until), INSERT_CHUNK per statement and transaction."""
    for first in range(1, rows + 1, INSERT_CHUNK):
        conn.execute(
            INSERT_FINISHED,
            {
                "first": first,
                "last": min(rows, first + INSERT_CHUNK - 1),
                "total": rows,
                "since": since,
                "until": until,
            },
        )
