"""bench.app_write_cost runs both engines end to end at small sizes and prints a row with a
ratio for every workload, and the statements each side sent per operation."""

from __future__ import annotations

import re

import pytest


def test_every_workload_is_timed_on_both_sides_and_the_ratios_printed(
    pg_admin_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.app_write_cost import COUNTED, WORKLOADS, main

    # Given a server, when one small round runs against the default engine before
    args = ["--rounds", "1", "--jobs", "200", "--singles", "20", "--database-url", pg_admin_url]
    assert main(args) == 0

    # Then the command line heads the output, and every workload has its row with rates
    # on both sides and a numeric ratio
    out = capsys.readouterr().out
    assert out.startswith("command: ") and "--singles 20" in out.splitlines()[0]
    number = r"\d+(?:\.\d+)?"
    for workload, unit in WORKLOADS:
        row = rf"^\| {re.escape(workload)} \| {unit} \| ({number}) \| ({number}) \| ({number}) \|$"
        found = re.search(row, out, re.M)
        assert found, f"no row for {workload}"
        before, after, ratio = map(float, found.groups())
        assert before > 0 and after > 0 and ratio > 0
    # Each side imported its own tree's engine, and counted its statements
    assert re.search(r'"before": "[^"]*tickq-before-[^"]*/queue_core/__init__.py"', out)
    for operation in COUNTED:
        assert re.search(rf"^\| {operation} \| [1-9]\d* \| \d+ \| [1-9]\d* \| \d+ \|$", out, re.M)
