"""The partition benchmark runs at a tiny size and measures what it says: a day partition
dropped whole and the same rows deleted in batches both prune every row."""

from __future__ import annotations


def test_partition_cost_prunes_both_ways(pg_admin_url: str) -> None:
    from bench import partition_cost

    pruned = partition_cost.prune(pg_admin_url, 500)

    assert pruned["partition_drop_deleted"] == pruned["batched_deletes_deleted"] == 500
    assert pruned["partition_drop_partitions_dropped"] == 1
    assert pruned["batched_deletes_partitions_dropped"] == 0
