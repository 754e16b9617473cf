"""Flow keys: stored on every enqueue path, bounded for every role, filled from task
templates, an outside caller's under its owner; limits per key prefix and holds enforced in
every claim variant, counted from the running jobs themselves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import psycopg
import pytest

import queue_core
from queue_core import PostgresStore, Registry
from queue_core.errors import InvalidJob
from queue_core.model.flow import FlowLimit, flow_limit
from queue_core.model.jobs import Outcome, Status
from queue_core.model.validation import job_spec
from queue_core.policies.flow_limits import FlowLimits
from queue_core.policies.limits import Limits, parse_rate, type_limit

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
VARIANTS = ("plain", "queues", "limited", "fair")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stored_keys(conn: psycopg.Connection) -> list[list[str]]:
    rows = conn.execute("select flow_keys from tickq.jobs order by created_at, id").fetchall()
    return [list(row[0]) for row in rows]


class Variant:
    """Jobs enqueued and claimed so that one claim variant leases them."""

    def __init__(self, conn: psycopg.Connection, name: str) -> None:
        self.name = name
        if name == "limited":  # a type limit routes the claim through tickq.claim_limited
            Limits(conn).set_type(type_limit("t", max_running=1000))
        self.queues = ("default", "other") if name == "queues" else ("default",)
        self.conn = conn

    def enqueue(self, keys: list[list[str]], *, now: datetime = T0) -> None:
        store = PostgresStore(self.conn)
        for i, job_keys in enumerate(keys):
            # Two groups make the queue mixed: the claim takes turns (tickq.claim_fair).
            group = f"g{i % 2}" if self.name == "fair" else None
            queue = self.queues[i % len(self.queues)]
            spec = job_spec("t", {"i": i}, queue=queue, group=group, flow_keys=job_keys)
            store.enqueue(spec, now=now - timedelta(seconds=1))

    def claim(self, limit: int, now: datetime) -> list:
        # A store per claim: each looks at the limit tables afresh.
        return PostgresStore(self.conn).claim(queues=self.queues, limit=limit, now=now)


# Enqueue surfaces


def test_every_python_enqueue_path_stores_the_keys(conn):
    queue_core.enqueue(conn, "t", {}, flow_keys=["shop:a", "openai:7"])
    queue_core.enqueue(conn, "t", {}, idempotency_key="k1", flow_keys=["shop:b"])
    queue_core.enqueue_many(
        conn,
        [
            {"type": "t", "flow_keys": ["shop:c"]},
            {"type": "t", "flow_keys": ["shop:d", "x"]},
            {"type": "t", "idempotency_key": "k2", "flow_keys": ["shop:e"]},
            {"type": "t"},
        ],
    )
    parent = queue_core.enqueue(conn, "t", {})
    queue_core.enqueue(conn, "t", {}, after=[parent.id], flow_keys=["shop:f"])

    assert sorted(map(tuple, stored_keys(conn))) == sorted(
        [
            ("shop:a", "openai:7"),
            ("shop:b",),
            ("shop:c",),
            ("shop:d", "x"),
            ("shop:e",),
            (),
            (),
            ("shop:f",),
        ]
    )


def test_the_job_row_and_its_dict_carry_the_keys(conn):
    made = queue_core.enqueue(conn, "t", {}, flow_keys=["shop:a"])
    assert made.job is not None and list(made.job.flow_keys) == ["shop:a"]
    got = PostgresStore(conn).get(made.id)
    assert got.to_dict()["flow_keys"] == ["shop:a"]


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ([f"k{i}" for i in range(9)], "at most 8"),
        (["has space"], "characters of"),
        (["x" * 201], "1-200"),
        ([""], "1-200"),
        ("shop:a", "must be a list"),
        ([7], "must be a string"),
    ],
)
def test_bad_keys_are_refused_with_what_was_wrong_and_nothing_written(conn, keys, says):
    with pytest.raises(InvalidJob, match=says):
        queue_core.enqueue(conn, "t", {}, flow_keys=keys)
    with pytest.raises(InvalidJob, match=says):
        queue_core.enqueue_many(conn, [{"type": "t"}, {"type": "t", "flow_keys": keys}])
    assert stored_keys(conn) == []


@pytest.mark.parametrize(
    "bad",
    [
        "array['has space']",
        "array['']",
        "array[null]::text[]",
        "array['" + "x" * 241 + "']",
        "array['a','b','c','d','e','f','g','h','i']",
        "array[array['a','b'],array['c','d']]",
    ],
)
def test_the_table_refuses_bad_keys_for_every_role(conn, bad):
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(f"insert into tickq.jobs (type, flow_keys) values ('t', {bad})")
    assert stored_keys(conn) == []


def test_sql_enqueue_takes_flow_keys_and_checks_them(conn):
    conn.execute("select tickq.enqueue('t', flow_keys => array['shop:a', 'shop:a', 'b'])")
    assert stored_keys(conn) == [["shop:a", "b"]]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="flow_keys must be a list"):
        conn.execute("select tickq.enqueue('t', flow_keys => array['no spaces please'])")
    assert stored_keys(conn) == [["shop:a", "b"]]


def test_a_tasks_templates_fill_from_the_payload_on_every_path(conn):
    tasks = Registry()

    @tasks.task("sync", flow_keys=["shop:{shop}", "acct:{account}"])
    def sync(job):
        return None

    queue_core.enqueue(conn, "sync", {"shop": "acme", "account": 7}, using=tasks)
    queue_core.enqueue_many(
        conn,
        [{"type": "sync", "payload": {"shop": "b", "account": 1}, "flow_keys": ["extra"]}],
        using=tasks,
    )
    with pytest.raises(InvalidJob, match="'shop'"):
        queue_core.enqueue(conn, "sync", {"account": 7}, using=tasks)
    # Published to the catalogue, the templates apply to SQL's enqueue too.
    from queue_core.postgres.catalog import publish

    publish(conn, tasks)
    conn.execute("""select tickq.enqueue('sync', '{"shop": "c", "account": 2}')""")
    # And so to a Python process without the task's module.
    queue_core.enqueue(conn, "sync", {"shop": "d", "account": 3}, using=Registry())
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="template"):
        conn.execute("""select tickq.enqueue('sync', '{"shop": true, "account": 2}')""")

    assert stored_keys(conn) == [
        ["shop:acme", "acct:7"],
        ["shop:b", "acct:1", "extra"],
        ["shop:c", "acct:2"],
        ["shop:d", "acct:3"],
    ]


def test_a_template_that_cannot_make_a_key_is_refused_when_the_task_is_declared():
    with pytest.raises(InvalidJob, match="flow key"):
        Registry().task("sync", flow_keys=["shop {shop}"])
    with pytest.raises(InvalidJob, match="top-level payload field"):
        Registry().task("sync", flow_keys=["shop:{shop.id}"])


def test_an_outside_callers_keys_are_stored_under_its_owner(conn, app_login_url):
    user = uuid4()
    with psycopg.connect(app_login_url, autocommit=True) as app:
        store = PostgresStore(app, user_id=user)
        store.enqueue(job_spec("t", {}, user_id=user, flow_keys=["shop:acme"]))
        with app.transaction():
            app.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
            app.execute("select tickq.enqueue('t', flow_keys => array['shop:b'])")
    conn.execute("select tickq.enqueue('t', flow_keys => array['shop:acme'])")
    assert stored_keys(conn) == [[f"{user}/shop:acme"], [f"{user}/shop:b"], ["shop:acme"]]


# Limits and holds in the claim


def test_the_cap_holds_per_key_not_per_prefix(conn):
    FlowLimits(conn).set(flow_limit("shop:", max_running=1))
    variant = Variant(conn, "plain")
    variant.enqueue([["shop:a"], ["shop:a"], ["shop:b"], ["shop:b"], []])

    claimed = variant.claim(10, at(0))

    assert sorted(tuple(j.flow_keys) for j in claimed) == [(), ("shop:a",), ("shop:b",)]


def test_a_running_job_of_one_key_holds_back_no_other_key_of_its_prefix(conn):
    FlowLimits(conn).set(flow_limit("shop:", max_running=1))
    variant = Variant(conn, "plain")
    variant.enqueue([["shop:a"], ["shop:a"], ["shop:b"]])

    first = variant.claim(1, at(0))
    second = variant.claim(10, at(1))

    assert [j.flow_keys for j in first] == [["shop:a"]]
    assert [j.flow_keys for j in second] == [["shop:b"]]


def test_the_longest_limited_prefix_governs(conn):
    limits = FlowLimits(conn)
    limits.set(flow_limit("shop:", max_running=1))
    limits.set(flow_limit("shop:big", max_running=3))
    variant = Variant(conn, "plain")
    variant.enqueue([["shop:bigco"]] * 5 + [["shop:small"]] * 5)

    claimed = variant.claim(10, at(0))

    keys = [j.flow_keys[0] for j in claimed]
    assert keys.count("shop:bigco") == 3
    assert keys.count("shop:small") == 1


@pytest.mark.parametrize("name", VARIANTS)
def test_every_claim_variant_keeps_each_key_within_its_cap(conn, name):
    FlowLimits(conn).set(flow_limit("k:", max_running=2))
    variant = Variant(conn, name)
    variant.enqueue([[f"k:{i % 3}"] for i in range(12)])

    first = variant.claim(12, at(0))
    again = variant.claim(12, at(1))

    keys = [j.flow_keys[0] for j in first]
    assert sorted(keys) == ["k:0", "k:0", "k:1", "k:1", "k:2", "k:2"]
    assert again == []


@pytest.mark.parametrize("name", VARIANTS)
def test_every_claim_variant_honours_a_hold(conn, name):
    variant = Variant(conn, name)
    variant.enqueue([["shop:a"], ["shop:b"], ["shop:a"], []])
    FlowLimits(conn).hold("shop:a", 60, now=at(0))

    claimed = variant.claim(10, at(1))
    later = variant.claim(10, at(61))

    assert sorted(tuple(j.flow_keys) for j in claimed) == [(), ("shop:b",)]
    assert [tuple(j.flow_keys) for j in later] == [("shop:a",), ("shop:a",)]


@pytest.mark.parametrize("name", VARIANTS)
def test_every_claim_variant_keeps_each_key_within_its_rate(conn, name):
    FlowLimits(conn).set(flow_limit("api:", rate=parse_rate("2/10s")))
    variant = Variant(conn, name)
    variant.enqueue([["api:x"]] * 6 + [["api:y"]] * 6)

    counts = []
    for second in (0, 5, 9.999, 10, 10.5, 20.5):
        claimed = variant.claim(10, at(second))
        counts.append(len(claimed))
    # 2 per key at 0; none until 10 s after those starts; 2 per key again at 10, then 20.
    assert counts == [4, 0, 0, 4, 0, 4]


def test_a_reclaimed_lease_frees_its_key(conn):
    FlowLimits(conn).set(flow_limit("shop:", max_running=1))
    variant = Variant(conn, "plain")
    variant.enqueue([["shop:a"], ["shop:a"]])
    store = PostgresStore(conn)
    (_first,) = variant.claim(10, at(0))

    assert variant.claim(10, at(1)) == []
    store.reclaim(now=at(1000))
    again = variant.claim(10, at(1001))

    assert len(again) == 1


def test_a_handler_holds_its_key_while_it_holds_its_lease(conn):
    # Given two jobs of one key, runnable on the database's clock, which holds use
    variant = Variant(conn, "plain")
    variant.enqueue([["shop:a"], ["shop:a"]], now=datetime.now(UTC))
    store = PostgresStore(conn)
    (job,) = store.claim(limit=1)
    until = store.hold_flow(job.id, job.lease_token, "shop:a", 120)

    assert until > datetime.now(UTC) + timedelta(seconds=100)
    assert PostgresStore(conn).claim(limit=10) == []
    with pytest.raises(queue_core.errors.LeaseLost):
        store.hold_flow(job.id, uuid4(), "shop:a", 5)
    with pytest.raises(InvalidJob, match="0-86400"):
        store.hold_flow(job.id, job.lease_token, "shop:a", 86_401)


def test_limits_are_listed_and_cleared(conn):
    limits = FlowLimits(conn)
    limits.set(flow_limit("shop:", max_running=2, rate=parse_rate("5/min")))
    assert limits.limits() == [FlowLimit("shop:", 2, 5, 60.0)]
    Variant(conn, "plain").enqueue([["shop:a"], ["shop:a"], ["z"]])
    limits.hold("z", 30, now=at(0))

    keys = {row["key"]: row for row in limits.keys_now(now=at(1))}

    assert keys["shop:a"]["waiting"] == 2 and keys["shop:a"]["prefix"] == "shop:"
    assert keys["z"]["held_until"] is not None and keys["z"]["prefix"] is None
    limits.clear("shop:")
    assert limits.limits() == []


def test_without_flow_limits_the_plain_claim_runs_its_own_statement(conn):
    store = PostgresStore(conn)
    assert not store.limits_configured().flow
    FlowLimits(conn).set(flow_limit("shop:", max_running=1))
    assert PostgresStore(conn).limits_configured().flow


def test_a_handler_told_to_back_off_holds_its_key_for_every_worker(conn):
    # Given three jobs of one key and one of another, runnable on the database's clock
    store = PostgresStore(conn)
    for keys in (["shop:a"], ["shop:a"], ["shop:a"], ["shop:b"]):
        store.enqueue(job_spec("t", {}, flow_keys=keys))
    calls: list[list[str]] = []
    registry = Registry()

    @registry.task("t")
    def handler(job):
        calls.append(list(job.row.flow_keys))
        if job.row.flow_keys == ["shop:a"]:
            job.hold_flow("shop:a", 300)  # the downstream said 429, Retry-After: 300
            raise queue_core.errors.RetryAfter(300)

    # When a runner runs one job at a time until nothing more starts
    with queue_core.Runner(store, registry, batch_size=1, concurrency=1) as runner:
        while runner.run_batch(queue_core.TickReport()):
            pass

    # Then the first job of the held key ran and held it; the other key's job ran; the
    # rest of the held key wait, and say so
    assert sorted(calls) == [["shop:a"], ["shop:b"]]
    waiting = conn.execute(
        "select count(*) from tickq.jobs where status = 'queued' and flow_keys = '{shop:a}'"
        " and run_after <= now()"  # the snoozed one waits out its RetryAfter besides
    ).fetchone()
    assert waiting == (2,)
    held = conn.execute(
        "select id from tickq.jobs where status = 'queued' and run_after <= now() limit 1"
    ).fetchone()
    assert store.flow_waits_for(held[0]) == "shop:a"


# Limits set by another process


def _a_store_that_has_looked(connect, queues: tuple[str, ...]) -> PostgresStore:
    """A worker's store (its own connection, like another process) whose probe has looked
    at the limit tables and found none."""
    store = PostgresStore(connect())
    assert store.claim(queues=queues, limit=10, now=at(0)) == []
    assert not store.limits_configured().any_claim_limit
    return store


@pytest.mark.parametrize("queues", [("default",), ("default", "other")])
def test_a_limit_set_by_another_process_holds_at_the_very_next_claim(conn, connect, queues):
    worker = _a_store_that_has_looked(connect, queues)
    Variant(conn, "plain").enqueue([["shop:a"], ["shop:a"], ["shop:a"], []])

    FlowLimits(connect()).set(flow_limit("shop:", max_running=1))
    claimed = worker.claim(queues=queues, limit=10, now=at(1))

    assert sorted(tuple(j.flow_keys) for j in claimed) == [(), ("shop:a",)]


def test_a_hold_set_by_another_process_holds_at_the_very_next_claim(conn, connect):
    worker = _a_store_that_has_looked(connect, ("default",))
    Variant(conn, "plain").enqueue([["shop:a"], ["shop:b"]])

    FlowLimits(connect()).hold("shop:a", 60, now=at(0))
    claimed = worker.claim(limit=10, now=at(1))

    assert [tuple(j.flow_keys) for j in claimed] == [("shop:b",)]


def test_a_type_limit_set_by_another_process_holds_at_the_very_next_claim(conn, connect):
    worker = _a_store_that_has_looked(connect, ("default",))
    Variant(conn, "plain").enqueue([[], [], []])

    Limits(connect()).set_type(type_limit("t", max_running=2))
    claimed = worker.claim(limit=10, now=at(1))

    assert len(claimed) == 2


def test_the_guarded_claim_still_persists_the_outcomes_it_was_given(conn, connect):
    worker = _a_store_that_has_looked(connect, ("default",))
    Variant(conn, "plain").enqueue([["shop:a"], ["shop:a"]])
    (first,) = worker.claim(limit=1, now=at(1))

    FlowLimits(connect()).set(flow_limit("shop:", max_running=1))
    held, batch = worker.finish_and_claim_unparsed(
        [Outcome(first.id, first.lease_token, Status.SUCCEEDED)], limit=10, now=at(2)
    )

    assert held == {first.id}
    assert [tuple(j.flow_keys) for j in batch.jobs()] == [("shop:a",)]


# Ended holds


def held_keys(conn: psycopg.Connection) -> list[str]:
    return [row[0] for row in conn.execute("select key from tickq.flow_holds order by key")]


def test_the_reclaim_deletes_holds_past_their_end_and_keeps_live_ones(conn):
    limits = FlowLimits(conn)
    limits.hold("ended", 60, now=at(0))
    limits.hold("ends-now", 100, now=at(0))
    limits.hold("live", 3600, now=at(0))

    PostgresStore(conn).reclaim(now=at(100))

    assert held_keys(conn) == ["live"]


def test_the_reclaim_deletes_at_most_its_limit_of_ended_holds_a_pass(conn):
    limits = FlowLimits(conn)
    for i in range(5):
        limits.hold(f"k{i}", 10 + i, now=at(0))

    PostgresStore(conn).reclaim(limit=2, now=at(100))
    left = held_keys(conn)
    PostgresStore(conn).reclaim(limit=2, now=at(100))

    assert left == ["k2", "k3", "k4"]  # the earliest ended go first
    assert held_keys(conn) == ["k4"]


def test_an_ended_hold_is_never_listed_even_before_the_reclaim(conn):
    FlowLimits(conn).hold("shop:a", 60, now=at(0))

    assert [row["key"] for row in FlowLimits(conn).keys_now(now=at(30))] == ["shop:a"]
    assert FlowLimits(conn).keys_now(now=at(61)) == []
