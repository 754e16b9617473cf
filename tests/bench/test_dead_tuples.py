"""bench.dead_tuples offers a load, drains it and samples the live partition's dead tuples,
at a tiny rate for a few seconds (the before/after row needs the git history and is left to
the benchmark run itself)."""

from __future__ import annotations

import pytest


def test_a_short_load_is_drained_and_its_dead_tuples_reported(
    pg_admin_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.dead_tuples import main

    # Given a server, when 40 jobs a second with TOAST-sized payloads are offered for 3 s
    args = ["--rate", "40", "--seconds", "3", "--concurrency", "4", "--payload-bytes", "4000"]
    assert main([*args, "--database-url", pg_admin_url]) == 0

    # Then the row of this tree says what was offered and finished, and what was sampled
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("| this tree |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    offered, completed, backlog, samples, peak = (float(c.replace(",", "")) for c in cells[1:6])
    assert 30 <= offered <= 41 and offered / 2 <= completed <= offered
    assert backlog < offered * 3
    assert samples >= 2
    # Each job that moved on left dead row versions behind, in the heap and in TOAST
    assert peak > 0 and float(cells[-1].replace(",", "")) > 0


def test_bad_options_are_refused() -> None:
    from bench.dead_tuples import main

    with pytest.raises(SystemExit):
        main(["--rate", "0"])
    with pytest.raises(SystemExit):
        main(["--naptime", "5", "--database-url", "postgresql://nowhere/x"])
