"""bench.overhead_cost drains every column at both batch sizes and prints the ratios to the
slim raw queue, at small sizes (the before/after column needs the git history and is left to
the benchmark run itself)."""

from __future__ import annotations

import pytest


def test_every_drain_runs_and_the_ratios_are_printed(
    pg_admin_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.overhead_cost import main

    # Given a server, when one small round runs, with the overlap switch's columns
    args = ["--jobs", "40", "--rounds", "1", "--overlap-switch", "--database-url", pg_admin_url]
    assert main(args) == 0

    # Then each column drained at batch 10 and 100, against the slim queue
    out = capsys.readouterr().out
    columns = "slim-raw | raw-sql | tickq | tickq overlap-always | tickq overlap-never"
    assert f"| batch | {columns} |" in out
    for batch in (10, 100):
        assert f"| {batch} (jobs/s) |" in out
        assert f"| {batch}: ÷ slim-raw | 1.00 [1.00-1.00] |" in out  # slim over itself
        assert f"| {batch}: client CPU per batch (µs) |" in out
