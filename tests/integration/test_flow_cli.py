"""`tickq enqueue --flow-key`, `tickq flow set/list/clear/hold` and what `tickq show` says of
a job that waits for its key."""

from __future__ import annotations

import psycopg

from queue_core.postgres import PostgresStore
from tests.integration.test_cli import Cli, cli, environment  # noqa: F401  (fixtures)


def test_enqueue_takes_repeated_flow_keys_and_show_lists_them(
    cli: Cli,  # noqa: F811
    conn: psycopg.Connection,
) -> None:
    code, made, _ = cli("enqueue", "sync", "--flow-key", "shop:a", "--flow-key", "x", "--json")
    assert code == 0

    code, shown, _ = cli("show", made["id"], "--json")

    assert code == 0
    assert shown["flow_keys"] == ["shop:a", "x"]
    assert shown["held_by_flow_key"] is None


def test_a_bad_flow_key_is_refused_and_nothing_written(
    cli: Cli,  # noqa: F811
    conn: psycopg.Connection,
) -> None:
    code, _, err = cli("enqueue", "sync", "--flow-key", "no spaces")

    assert code != 0
    assert "flow key" in err
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)


def test_flow_set_list_hold_and_clear(cli: Cli, conn: psycopg.Connection) -> None:  # noqa: F811
    code, limit, _ = cli("flow", "set", "shop:", "--max-running", "2", "--rate", "10/min", "--json")
    assert code == 0
    assert limit == {
        "prefix": "shop:",
        "max_running": 2,
        "rate_limit": 10,
        "rate_period_seconds": 60.0,
    }
    _, made, _ = cli("enqueue", "sync", "--flow-key", "shop:a", "--json")
    code, held, _ = cli("flow", "hold", "shop:a", "--seconds", "300", "--json")
    assert code == 0 and held["key"] == "shop:a"

    _, listed, _ = cli("flow", "list", "--json")
    _, shown, _ = cli("show", made["id"], "--json")
    _, text, _ = cli("show", made["id"])

    assert [row["prefix"] for row in listed["limits"]] == ["shop:"]
    (key,) = listed["keys"]
    assert (key["key"], key["waiting"], key["running"]) == ("shop:a", 1, 0)
    assert key["held_until"] is not None
    assert shown["held_by_flow_key"] == "shop:a"
    assert "held by flow key shop:a" in text
    assert cli("flow", "clear", "shop:")[0] == 0
    assert cli("flow", "clear", "shop:")[0] != 0  # no such limit any more


def test_flow_refuses_bad_input_and_changes_nothing(
    cli: Cli,  # noqa: F811
    conn: psycopg.Connection,
) -> None:
    assert cli("flow", "set", "shop:")[0] != 0  # neither a cap nor a rate
    assert cli("flow", "set", "shop:", "--rate", "fast")[0] != 0
    assert cli("flow", "hold", "shop:a", "--seconds", "86401")[0] != 0
    assert cli("flow", "set", "bad prefix", "--max-running", "1")[0] != 0
    assert conn.execute("select count(*) from tickq.flow_limits").fetchone() == (0,)
    assert conn.execute("select count(*) from tickq.flow_holds").fetchone() == (0,)
    assert PostgresStore(conn).limits_configured().flow is False


def test_flow_list_never_shows_an_ended_hold_and_the_reclaim_deletes_it(
    cli: Cli,  # noqa: F811
    conn: psycopg.Connection,
) -> None:
    conn.execute(
        "insert into tickq.flow_holds (key, until, set_at) values"
        " ('ended', now() - interval '1 second', now() - interval '1 minute'),"
        " ('live', now() + interval '1 hour', now())"
    )

    _, listed, _ = cli("flow", "list", "--json")
    _, text, _ = cli("flow", "list")
    PostgresStore(conn).reclaim()

    assert [key["key"] for key in listed["keys"]] == ["live"]
    assert "ended" not in text
    keys = [row[0] for row in conn.execute("select key from tickq.flow_holds")]
    assert keys == ["live"]
