"""The benchmark harness runs end to end in its quick mode and writes its results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pgqueuer", reason="benchmark extra not installed (pip install .[bench])")
pytest.importorskip("procrastinate", reason="benchmark extra not installed")
pytest.importorskip("awa", reason="benchmark extra not installed")


def test_quick_run_writes_json_and_chart_for_every_system(
    pg_admin_url: str, tmp_path: Path
) -> None:
    from bench.__main__ import main

    # Given a server, when the quick benchmark runs against it
    assert main(["--quick", "--database-url", pg_admin_url, "--out", str(tmp_path)]) == 0

    # Then it wrote a JSON summary naming every system, and a chart
    summary = json.loads((tmp_path / "results.json").read_text())
    drained = summary["table"]["drain_1p_b100"]
    every = {"tickq tick", "tickq work", "raw-sql", "slim-raw", "pgqueuer", "procrastinate", "awa"}
    assert every <= set(drained)
    assert all(stats["median"] > 0 for stats in drained.values())
    # awa, the Rust-core peer, ran every measurement, batch 10 included (it has a batch size)
    assert {metric for metric, by_label in summary["table"].items() if "awa" in by_label} == {
        "bulk_enqueue",
        "single_enqueue",
        "drain_1p_b100",
        "drain_2p_b100",
        "drain_1p_b10",
        "latency_p50_ms",
        "latency_p99_ms",
    }
    # The slim raw queue is the reference of the drain targets at batch 100 and 10.
    slim = {(r["metric"], r["ratio"]) for r in summary["ratios"] if "slim-raw" in r["ratio"]}
    assert ("drain_1p_b100", "tickq tick / slim-raw") in slim
    assert ("drain_1p_b10", "tickq tick / slim-raw") in slim
    assert summary["claim_cost"]["finished_rows"] == 10_000
    assert set(summary["round_trips_per_batch"]) == {"1", "10", "100"}
    assert (tmp_path / "results.png").stat().st_size > 0
