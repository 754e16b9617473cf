"""The store's named SQL statements, parsed once from sql/queries.sql and sql/console.sql."""

from __future__ import annotations

import re
from importlib import resources

from .jobs import JOB_COLUMNS

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, str]:
    sql_dir = resources.files("queue_core") / "sql"
    columns = ", ".join(JOB_COLUMNS)
    columns_j = ", ".join(f"j.{c}" for c in JOB_COLUMNS)
    statements: dict[str, str] = {}
    for file in ("queries.sql", "console.sql"):
        parts = _NAME.split((sql_dir / file).read_text(encoding="utf-8"))
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            sql = body.strip().replace("{columns_j}", columns_j).replace("{columns}", columns)
            statements[name] = sql.rstrip(";")
    # With several queues the backlog is sorted rather than walked in index order.
    statements["jobs_finish_and_claim_queues"] = statements["jobs_finish_and_claim"].replace(
        "queue = %(queue)s", "queue = any(%(queues)s::text[])"
    )
    statements["retention_count"] = _counting(statements["retention_prune"])
    return statements


def _counting(prune: str) -> str:
    """retention_prune as a dry run: every job it would delete, counted by status."""
    lock = "    limit %(batch)s\n    for update of j skip locked\n"
    delete = (
        "delete from tickq.jobs j\nwhere j.id = any(array(select id from doomed))\n"
        "returning j.status"
    )
    # Comments go too: the header mentions %(batch)s, which the driver would still bind.
    prune = "\n".join(line for line in prune.splitlines() if not line.lstrip().startswith("--"))
    if lock not in prune or not prune.endswith(delete):
        raise RuntimeError("retention_prune changed shape; update queries._counting")
    count = (
        "select j.status, count(*)\nfrom tickq.jobs j\n"
        "where j.id = any(array(select id from doomed))\ngroup by j.status"
    )
    return prune.replace(lock, "").removesuffix(delete) + count


QUERIES: dict[str, str] = _load()
