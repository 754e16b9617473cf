"""A malicious tenant's attacks on the claim, replayed through the HTTP API (ApiFunction's
handler) and as the tickq_app login: spreading jobs over many groups, or raising their
priority, gets a tenant no turn ahead of another's job."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.model import validation
from tests.functions.conftest import FakeContext, http_event
from tests.security.conftest import RoleConnect
from tests.security.test_tenancy_bounds import Api, scoped
from tickq.functions import api


@pytest.fixture
def call(function_env: None, monkeypatch: pytest.MonkeyPatch, app_url: str, tasks: object) -> Api:
    """ApiFunction on the application login, serving the default queue."""
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)

    def invoke(method: str, path: str, **options: Any) -> tuple[int, Any]:
        response = api.handler(http_event(method, path, **options), FakeContext())
        body = response.get("body")
        return response["statusCode"], json.loads(body) if body else None

    return invoke


def post(call: Api, sub: UUID, **body: Any) -> str:
    status, answer = call("POST", "/jobs", body={"type": "t", **body}, sub=sub)
    assert status == 202, answer
    return str(answer["id"])


def batches(conn: psycopg.Connection, count: int, size: int = 10) -> list[set[str]]:
    """`count` claims of `size` by one worker (its store kept between them), as job ids."""
    store = PostgresStore(conn)
    return [{str(job.id) for job in store.claim(limit=size)} for _ in range(count)]


# Where a new worker's first sweep begins is drawn at random (fairness.start_between); the
# attacks below are judged from each of these starting points, the first one the attacker's
# best: just before its own groups, which sort ahead of the victim's.
ROLLS = (0.0, 0.3, 0.6, 0.999)
BOB = UUID("11111111-1111-4111-8111-111111111111")
ALICE = UUID("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa")


def first_batches(conn: psycopg.Connection) -> dict[float, set[str]]:
    """A new worker's first claim of 10 from each starting point, each rolled back."""
    taken = {}
    for roll in ROLLS:
        with conn.transaction(force_rollback=True):
            store = PostgresStore(conn, rand=lambda roll=roll: roll)
            taken[roll] = {str(job.id) for job in store.claim(limit=10)}
    return taken


def test_a_tenants_200_groups_take_one_turn_against_another_tenants_job(
    call: Api, conn: psycopg.Connection
) -> None:
    for n in range(200):
        post(call, BOB, group=f"g{n:03}")
    victim = post(call, ALICE)

    for roll, first in first_batches(conn).items():
        assert victim in first, f"a worker starting at {roll} passed the victim by"
        assert len(first) == 10


def test_a_tenants_top_priority_does_not_overtake_another_tenants_job(
    call: Api, conn: psycopg.Connection
) -> None:
    for _ in range(31):
        post(call, BOB, priority=2147483647)
    victim = post(call, ALICE)

    for roll, first in first_batches(conn).items():
        assert victim in first, f"a worker starting at {roll} passed the victim by"


def test_a_callers_priority_orders_its_own_jobs(call: Api, conn: psycopg.Connection) -> None:
    bob = uuid4()
    low = [post(call, bob, priority=1) for _ in range(3)]
    high = [post(call, bob, priority=9) for _ in range(3)]

    first, second = batches(conn, 2, size=3)

    assert (first, second) == (set(high), set(low))


def test_a_trusted_enqueuers_priority_stays_a_global_level(
    call: Api, conn: psycopg.Connection
) -> None:
    bob = uuid4()
    for _ in range(5):
        post(call, bob, priority=2147483647)
    trusted = PostgresStore(conn).enqueue(validation.job_spec("t", priority=1, group="ops"))

    first = batches(conn, 1, size=1)[0]

    assert first == {str(trusted.id)}


def test_the_app_role_cannot_invent_tenants_or_join_another_in_sql(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    with scoped(as_app(), bob) as c:
        for group in (None, "x1", f"{alice}/mine", f"{alice}"):
            c.execute(
                "select * from tickq.enqueue_many(jsonb_build_array("
                "jsonb_build_object('type', 't', 'group', %s::text, 'priority', 7)))",
                (group,),
            )
    stored = conn.execute(
        "select group_key, priority, owner_priority from tickq.jobs order by created_at, group_key"
    ).fetchall()
    assert sorted(stored) == sorted(
        [
            (str(bob), 0, 7),
            (f"{bob}/x1", 0, 7),
            (f"{bob}/{alice}/mine", 0, 7),
            (f"{bob}/{alice}", 0, 7),
        ]
    )
