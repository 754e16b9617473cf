"""Cancel, retry, the counts, the group counts and the job search have one body each: the
operator's security-definer functions call the store's body (its statements call the same
one) and write or count no job themselves, so a fix to a rule lands in one place."""

from __future__ import annotations

import re

import pytest

from queue_core.migrate import schema_files
from queue_core.postgres.statements import QUERIES
from tests.schema.sqltext import normalized

FILES = dict(schema_files())

# The operator's entry point, the one body it wraps, and the store's statements over it.
WRAPPERS = {
    "operator_cancel": ("jobs_cancel", ("jobs_cancel",)),
    "operator_retry": ("jobs_retry", ("jobs_retry",)),
    "operator_stats": ("jobs_stats", ("jobs_stats",)),
    "operator_group_stats": ("jobs_group_stats", ("jobs_stats_groups",)),
    "operator_jobs": ("jobs_search", ("jobs_search", "jobs_search_listed")),
}


def body(name: str) -> str:
    """A function file's code after its header, normalized."""
    return normalized(FILES[f"functions/{name}.sql"]).split("$$", 1)[1]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_an_operator_entry_point_wraps_the_one_body(wrapper: str) -> None:
    shared, statements = WRAPPERS[wrapper]
    code = body(wrapper)
    # It calls the shared body, and selects from tickq.jobs nothing of its own: no update,
    # no count, no filter (it may join a requested id's row, for its status).
    assert f"tickq.{shared}(" in code
    assert "update tickq.jobs" not in code and "count(" not in code
    assert not re.search(r"from tickq\.jobs\b(?!_)", code)
    # And the store's statements read the same body.
    for statement in statements:
        assert f"tickq.{shared}(" in QUERIES[statement], statement


def test_retrying_every_dead_job_goes_through_the_operators_retry() -> None:
    assert "tickq.operator_retry(" in body("operator_retry_dead")
    assert "update tickq.jobs" not in body("operator_retry_dead")
