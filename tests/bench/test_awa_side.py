"""awa's Rust core (sqlx) reads neither libpq's `user@` with an empty host nor keyword
conninfo, so the bench hands it every server URL rewritten into query parameters."""

from __future__ import annotations

import pytest

pytest.importorskip("awa", reason="benchmark extra not installed (pip install .[bench])")

from bench.systems.awa_side import awa_url


def test_socket_url_moves_user_into_the_query() -> None:
    url = "postgresql://postgres@/bench_awa_1?host=/tmp/tq-abc&port=5433"
    assert awa_url(url) == "postgresql:///bench_awa_1?host=%2Ftmp%2Ftq-abc&port=5433&user=postgres"


def test_keyword_conninfo_becomes_a_url() -> None:
    conninfo = "host=db.internal port=5432 user=bench password=s3cret dbname=jobs"
    assert awa_url(conninfo) == (
        "postgresql:///jobs?host=db.internal&port=5432&user=bench&password=s3cret"
    )
