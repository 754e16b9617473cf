"""Medians, spreads, same-run ratios and target verdicts; printed, and saved as JSON + PNG."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness import Samples

TITLES = {
    "drain_1p_b100": "drain, 1 process, batch 100 (jobs/s)",
    "drain_2p_b100": "drain, 2 processes, batch 100 (jobs/s)",
    "drain_1p_b10": "drain, 1 process, batch 10 (jobs/s)",
    "bulk_enqueue": "bulk enqueue, 1000 per statement (jobs/s)",
    "single_enqueue": "single enqueue, one commit each (jobs/s)",
    "latency_p50_ms": "latency enqueue→start p50 (ms)",
    "latency_p99_ms": "latency enqueue→start p99 (ms)",
}


@dataclass(frozen=True)
class Target:
    """`numerator / denominator` of one metric, per run, must reach `at_least`."""

    metric: str
    numerator: str
    denominator: str
    at_least: float


TARGETS = (
    Target("drain_1p_b100", "tickq tick", "pgqueuer", 2.0),
    Target("drain_1p_b100", "tickq work", "pgqueuer", 2.0),
    Target("drain_1p_b100", "tickq tick", "raw-sql", 0.75),
    Target("drain_1p_b100", "tickq work", "raw-sql", 0.75),
    # The slim raw queue (8 columns, one partial index): the floor of any Postgres queue.
    Target("drain_1p_b100", "tickq tick", "slim-raw", 0.5),
    Target("drain_1p_b100", "tickq work", "slim-raw", 0.5),
    Target("drain_1p_b10", "tickq tick", "slim-raw", 0.5),
    Target("drain_2p_b100", "tickq tick", "pgqueuer", 2.0),
    Target("drain_2p_b100", "tickq work", "pgqueuer", 2.0),
    Target("bulk_enqueue", "tickq", "pgqueuer", 1.5),
    Target("single_enqueue", "tickq", "raw-sql", 0.8),
)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(samples: Samples, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON document: per-run values, their spread, ratios and target verdicts."""
    table = {
        metric: {label: {"runs": vals, **spread(vals)} for label, vals in by_label.items()}
        for metric, by_label in samples.values.items()
    }
    ratios = []
    for target in TARGETS:
        by_label = samples.values.get(target.metric, {})
        top, bottom = by_label.get(target.numerator), by_label.get(target.denominator)
        if not top or not bottom:
            continue
        per_run = [a / b for a, b in zip(top, bottom, strict=True)]
        median = statistics.median(per_run)
        ratios.append(
            {
                "metric": target.metric,
                "ratio": f"{target.numerator} / {target.denominator}",
                "target": target.at_least,
                **spread(per_run),
                "met": median >= target.at_least,
            }
        )
    ratios += _peer_ratios(samples)
    claim = extra.get("claim_cost")
    if claim:
        ratios.append(
            {
                "metric": "claim_cost",
                "ratio": "claim with finished rows / with none",
                "target_at_most": 1.05,
                "median": claim["ratio"],
                "min": claim["ratio"],
                "max": claim["ratio"],
                "met": claim["ratio"] <= 1.05,
            }
        )
    trips = extra.get("round_trips_per_batch")
    if trips:
        constant = len(set(trips.values())) == 1
        ratios.append(
            {
                "metric": "round_trips_per_batch",
                "ratio": "by batch size",
                "values": trips,
                "met": constant,
            }
        )
    return {"table": table, "ratios": ratios, **extra}


def _peer_ratios(samples: Samples) -> list[dict[str, Any]]:
    """tickq over every peer for every metric both ran (informative, no target)."""
    out = []
    for metric, by_label in samples.values.items():
        mine = [label for label in by_label if label.startswith("tickq")]
        peers = [label for label in by_label if not label.startswith("tickq")]
        for a in mine:
            for b in peers:
                per_run = [x / y for x, y in zip(by_label[a], by_label[b], strict=True)]
                out.append({"metric": metric, "ratio": f"{a} / {b}", **spread(per_run)})
    return out


def render(summary: dict[str, Any]) -> str:
    """A Markdown table of medians [min-max], then the target verdicts."""
    labels: list[str] = []
    for by_label in summary["table"].values():
        labels += [label for label in by_label if label not in labels]
    lines = ["| measurement | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for metric, by_label in summary["table"].items():
        cells = [_cell(by_label.get(label)) for label in labels]
        lines.append(f"| {TITLES.get(metric, metric)} | " + " | ".join(cells) + " |")
    lines += ["", "| target | median ratio [min-max] | goal | verdict |", "|---|---|---|---|"]
    for ratio in summary["ratios"]:
        if "met" not in ratio:
            continue
        lines.append(_verdict_row(ratio))
    lines += ["", "| tickq vs peer (same run) | median ratio [min-max] |", "|---|---|"]
    for ratio in summary["ratios"]:
        if "met" not in ratio:
            lines.append(
                f"| {ratio['metric']}: {ratio['ratio']} | {ratio['median']:.2f} "
                f"[{ratio['min']:.2f}-{ratio['max']:.2f}] |"
            )
    return "\n".join(lines)


def _verdict_row(ratio: dict[str, Any]) -> str:
    verdict = "met" if ratio["met"] else "MISSED"
    if ratio["metric"] == "round_trips_per_batch":
        values = ", ".join(f"batch {k}: {v:g}" for k, v in ratio["values"].items())
        return f"| round trips per batch | {values} | constant | {verdict} |"
    goal = f"≥ {ratio['target']}" if "target" in ratio else f"≤ {ratio['target_at_most']}"
    return (
        f"| {ratio['metric']}: {ratio['ratio']} | {ratio['median']:.2f} "
        f"[{ratio['min']:.2f}-{ratio['max']:.2f}] | {goal} | {verdict} |"
    )


def _cell(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return "—"
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.1f}"  # noqa: E731
    return f"{fmt(stats['median'])} [{fmt(stats['min'])}-{fmt(stats['max'])}]"


def save(summary: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    png_path = out_dir / "results.png"
    chart(summary, png_path)
    return json_path, png_path


def chart(summary: dict[str, Any], path: Path) -> None:
    """One bar group per throughput metric, medians with min-max whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in summary["table"] if not m.startswith("latency")]
    latency = [m for m in summary["table"] if m.startswith("latency")]
    fig, axes = plt.subplots(
        1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [max(len(metrics), 1), 2]}
    )
    # One colour per system across both panels (the latency panel has no raw-SQL bar).
    every: list[str] = []
    for metric in summary["table"]:
        every += [label for label in summary["table"][metric] if label not in every]
    colours = {label: f"C{i}" for i, label in enumerate(every)}
    for ax, group, unit in ((axes[0], metrics, "jobs/s"), (axes[1], latency, "ms")):
        labels: list[str] = []
        for metric in group:
            labels += [label for label in summary["table"][metric] if label not in labels]
        width = 0.8 / max(len(labels), 1)
        for i, label in enumerate(labels):
            xs, ys, lo, hi = [], [], [], []
            for x, metric in enumerate(group):
                stats = summary["table"][metric].get(label)
                if stats:
                    xs.append(x + i * width)
                    ys.append(stats["median"])
                    lo.append(stats["median"] - stats["min"])
                    hi.append(stats["max"] - stats["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], label=label, capsize=2, color=colours[label])
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(group))])
        ax.set_xticklabels([m.replace("_", "\n") for m in group], fontsize=8)
        ax.set_ylabel(unit)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.suptitle("tickq vs raw SQL, PgQueuer, Procrastinate and awa (medians, min-max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
