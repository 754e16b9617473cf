"""`tickq events`: the outbox's events, newest first, and its backlog
(queue_core/policies/outbox.py).

The backlog is what waits to be published: how many events, and how long the oldest has
waited. Events that EventBridge refused show their attempts and the last reason. One event,
by its event id, shows its full detail: that of an event published reduced (too big for a
PutEvents call) too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from queue_core.errors import ConfigurationError
from queue_core.policies.outbox import Outbox
from tickq.infra import extras
from tickq.infra.cli.common import database, emit, out, positive

Command = Callable[..., argparse.ArgumentParser]


def cmd_events(args: argparse.Namespace) -> int:
    if args.publish:
        extras.require("tickq events --publish", "boto3")
    with database() as conn:
        published = _publish(conn) if args.publish else None
        outbox = Outbox(conn)
        backlog = outbox.backlog()
        events = outbox.events(
            pending_only=args.pending, job_id=args.job, event_id=args.event, limit=args.limit
        )
    data = {"backlog": backlog.as_dict(), "events": events}
    if published is not None:
        data["published"] = published

    def human() -> None:
        if published is not None:
            out.print(
                f"published {published['published']} event(s) to {published['bus']}"
                + (", the bus refused some: see the last errors" if published["held"] else "")
            )
        oldest = (
            "" if backlog.oldest_seconds is None else f", the oldest {backlog.oldest_seconds:.0f} s"
        )
        out.print(f"{backlog.pending} event(s) waiting to be published{oldest}")
        if not events:
            out.print("no events" + (" pending" if args.pending else ""))
            return
        table = Table()
        for column in (
            "id",
            "event id",
            "type",
            "job",
            "created",
            "published",
            "attempts",
            "last error",
        ):
            table.add_column(column)
        for e in events:
            table.add_row(*_row(e))
        out.print(table)
        if args.event:
            out.print_json(data=events[0]["detail"])

    emit(args, data, human)
    return 0


def _publish(conn: Any) -> dict[str, Any]:
    """One publisher run, as a tick's (for `tickq work` deployments, which run no tick)."""
    import os

    from tickq.functions.aws import publish_outbox

    bus = os.environ.get("TICKQ_EVENT_BUS")
    if not bus:
        raise ConfigurationError("tickq events --publish needs TICKQ_EVENT_BUS (the bus name)")
    return {"bus": bus, **publish_outbox(conn).as_dict()}


def _row(e: dict[str, Any]) -> list[str]:
    return [
        str(e["id"]),
        str(e["event_id"]),
        e["detail_type"] if e["source"] == "tickq" else f"{e['detail_type']} ({e['source']})",
        "" if e["job_id"] is None else str(e["job_id"]),
        f"{e['created_at']:%Y-%m-%d %H:%M:%S %Z}",
        "pending" if e["published_at"] is None else f"{e['published_at']:%Y-%m-%d %H:%M:%S %Z}",
        str(e["attempts"]),
        e["last_error"] or "",
    ]


def register(command: Command) -> None:
    """Add `tickq events` through cli.build_parser's `command` factory."""
    p = command(
        "events",
        cmd_events,
        "list the outbox's events (newest first) and how many wait to be published",
        "  tickq events                                the latest events and the backlog\n"
        "  tickq events --pending                      only those not yet published\n"
        "  tickq events --job 0192f4c3-...             one job's events\n"
        "  tickq events --event 6f1c2e7a-... --json    one event, its full detail\n"
        "  tickq events --publish                      send the pending ones to TICKQ_EVENT_BUS",
    )
    p.add_argument("--pending", action="store_true", help="only events not yet published")
    p.add_argument("--job", metavar="ID", help="only this job's events")
    p.add_argument(
        "--event", metavar="ID", help="only the event of this event id (detail.event_id)"
    )
    p.add_argument("--limit", type=positive, default=50, help="how many (default 50)")
    p.add_argument(
        "--publish",
        action="store_true",
        help="first publish the pending events to TICKQ_EVENT_BUS (needs tickq[aws])",
    )
