"""One benchmark run: every system, every measurement, on one server, in one process tree."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .processes import new_queue, start_process, timed_in_processes
from .server import fresh_database
from .systems import System, all_systems, tickq_side


@dataclass(frozen=True)
class Sizes:
    """How much work each measurement does; `--quick` shrinks all of it."""

    drain_jobs: int = 20_000
    bulk_jobs: int = 20_000
    single_jobs: int = 500
    latency_samples: int = 200
    latency_interval: float = 0.02
    finished_rows: int = 1_000_000
    runs: int = 3


@dataclass
class Samples:
    """Values per (metric, system label), one per run, in run order."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, metric: str, label: str, value: float) -> None:
        self.values.setdefault(metric, {}).setdefault(label, []).append(value)


DRAINS = (
    # metric, worker processes, batch size
    ("drain_1p_b100", 1, 100),
    ("drain_2p_b100", 2, 100),
    ("drain_1p_b10", 1, 10),
)


def run_once(admin_url: str, sizes: Sizes, samples: Samples, log: Callable[[str], None]) -> None:
    for system in all_systems():
        with fresh_database(admin_url, system.name.replace("-", "_")) as url:
            system.install(url)
            _enqueue_rates(system, url, sizes, samples, log)
            _drain_rates(system, url, sizes, samples, log)
            if system.latency_worker is not None:
                _latency(system, url, sizes, samples, log)


def _enqueue_rates(
    system: System, url: str, sizes: Sizes, samples: Samples, log: Callable[[str], None]
) -> None:
    # The bulk-enqueued jobs are the first drain's backlog: a slow peer gets a smaller one.
    bulk = min(sizes.bulk_jobs, system.max_drain_jobs or sizes.bulk_jobs)
    seconds = system.bulk_enqueue(url, bulk)
    samples.add("bulk_enqueue", system.name, bulk / seconds)
    seconds = system.single_enqueue(url, sizes.single_jobs)
    samples.add("single_enqueue", system.name, sizes.single_jobs / seconds)
    log(f"{system.name}: enqueue measured")


def _drain_rates(
    system: System, url: str, sizes: Sizes, samples: Samples, log: Callable[[str], None]
) -> None:
    """Each drain starts from a bulk-enqueued backlog (the first also holds the single
    enqueues); the rate counts the jobs the handlers actually ran."""
    if system.prepare_drain is None:
        return
    backlog = min(sizes.drain_jobs, system.max_drain_jobs or sizes.drain_jobs)
    first = True
    for metric, processes, batch in DRAINS:
        variants = system.drain_variants if batch == 100 else system.drain_variants[:1]
        for variant in variants:
            if metric == "drain_1p_b10" and system.name == "procrastinate":
                continue  # it has no batch size: its batch-100 figure already is one-by-one
            if not first:
                system.bulk_enqueue(url, backlog)
            first = False
            seconds, done = timed_in_processes(
                system.prepare_drain, (url, batch, variant), processes
            )
            if done < backlog:
                raise RuntimeError(f"{system.name} {variant} ran {done} of {backlog} jobs")
            label = system.name if len(system.drain_variants) == 1 else f"{system.name} {variant}"
            samples.add(metric, label, done / seconds)
            log(f"{label}: {metric} {done / seconds:,.0f} jobs/s")


def _latency(
    system: System, url: str, sizes: Sizes, samples: Samples, log: Callable[[str], None]
) -> None:
    """Enqueue committed → handler started, with the worker idle between jobs."""
    assert system.latency_worker is not None and system.latency_producer is not None
    expected, ready, out = new_queue(), new_queue(), new_queue()
    worker = start_process(system.latency_worker, url, expected, ready, out)
    ready.get(timeout=120)
    time.sleep(1.0)  # let the worker reach its idle state
    committed = system.latency_producer(url, sizes.latency_samples, sizes.latency_interval)
    expected.put(len(committed))  # the worker stops once it has started that many
    started: dict[str, float] = out.get(timeout=180)
    worker.join(timeout=30)
    delays = [started[job] - at for job, at in committed.items() if job in started]
    if len(delays) < len(committed):
        raise RuntimeError(f"{system.name}: {len(committed) - len(delays)} jobs never started")
    cuts = statistics.quantiles(delays, n=100, method="inclusive")
    samples.add("latency_p50_ms", system.name, cuts[49] * 1000)
    samples.add("latency_p99_ms", system.name, cuts[98] * 1000)
    log(f"{system.name}: latency p50 {cuts[49] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms")


def round_trips(admin_url: str) -> dict[int, float]:
    with fresh_database(admin_url, "roundtrips") as url:
        tickq_side.install(url)
        return tickq_side.batch_round_trips(url, (1, 10, 100))


def describe_sizes(sizes: Sizes) -> dict[str, Any]:
    return {name: getattr(sizes, name) for name in sizes.__dataclass_fields__}
