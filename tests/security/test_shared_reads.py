"""The reads a user's store and the operator share (counts, group counts, the job search:
tickq.jobs_stats, tickq.jobs_group_stats, tickq.jobs_search) run with the caller's rights:
an application user's counts and pages hold its own jobs only, an operator's every user's
(through the security-definer wrappers), and an operator login cannot call the shared body
itself to read rows."""

from __future__ import annotations

from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect

NO_FILTERS = {
    "statuses": None,
    "types": None,
    "queues": None,
    "groups": None,
    "error": None,
    "created_from": None,
    "created_to": None,
}


def seed(conn: psycopg.Connection, alice: UUID, bob: UUID) -> None:
    store = PostgresStore(conn)
    for user, count in ((alice, 2), (bob, 3)):
        for _ in range(count):
            store.enqueue(validation.job_spec("report", {}, user_id=user, group="g"))


def test_an_application_user_counts_and_finds_its_own_jobs_only(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    seed(conn, alice, bob)
    mine = PostgresStore(as_app(), user_id=alice)

    assert [row.count for row in mine.stats()] == [2]
    assert [(row.waiting, row.running) for row in mine.group_stats()] == [(2, 0)]
    assert {job.user_id for job in mine.search_jobs(NO_FILTERS).jobs} == {alice}


def test_the_operators_wrappers_count_every_users_jobs(
    conn: psycopg.Connection, operator_url: str, alice: UUID, bob: UUID
) -> None:
    seed(conn, alice, bob)
    with psycopg.connect(operator_url, autocommit=True) as operator:
        store = PostgresStore(operator)
        assert [row.count for row in store.stats_all_users()] == [5]
        assert [row.waiting for row in store.group_stats_all_users()] == [5]


@pytest.mark.parametrize(
    "call",
    [
        "select * from tickq.jobs_stats(null)",
        "select * from tickq.jobs_group_stats(null)",
        "select * from tickq.jobs_search(null, null, null, null, null, null, null, null, null, 9)",
    ],
)
def test_an_operator_login_cannot_read_jobs_through_the_shared_bodies(
    conn: psycopg.Connection, operator_url: str, alice: UUID, bob: UUID, call: str
) -> None:
    seed(conn, alice, bob)
    with (
        psycopg.connect(operator_url, autocommit=True) as operator,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        operator.execute(call)
