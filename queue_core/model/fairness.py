"""Taking turns across tenants, then across each tenant's groups: where a worker's fair
claim resumes, and when a queue needs one at all.

The claim itself is SQL (`tickq.claim_fair`, queue_core/schema/functions/): within the best
priority level of a queue it sweeps the tenants with runnable jobs in tenant order, one
tenant per job still wanted, starting after the tenant where this worker's previous sweep
ended, and within each tenant sweeps its groups from the one this worker served last in
it. A job's tenant is its group key up to the first '/' (`tenant_of`): the HTTP API's
groups are "<caller>/<group>", so a caller's many groups share one tenant's turns. The only
state is those positions, kept by the worker: nothing shared can leak or go stale. A worker
that starts afresh begins at a random point among the tenants (see `start_between`), or,
when it has not looked at them, at the tenant of the best runnable job.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from queue_core.model.jobs import Job
from queue_core.model.transitions import claim_order

# How long a store trusts its last look at whether a queue's jobs span several groups: a
# second group is served fairly within this time, and a queue of one group runs the plain
# claim, unchanged, at the cost of one probe per period.
GROUPS_TTL_SECONDS = 5.0
# How many tenants' group positions a worker remembers per queue (the most recently
# served): a tenant it forgot starts again at its first group, which costs that tenant's
# own groups their order, never another tenant a turn. Bounded, since every fair claim
# sends them.
TENANT_POSITIONS = 256


def tenant_of(group_key: str) -> str:
    """The tenant a group belongs to: the key up to its first '/', or the whole key."""
    return group_key.split("/", 1)[0]


def sweep_position(after: str | None, groups: Iterable[str], began: str = "") -> str | None:
    """Where the next sweep starts: the last group of this one in sweep order.

    A sweep goes through the groups after `after` in byte order (the column's "C"
    collation, which is also Python's order of str), then wraps around to the first
    groups. Groups at or before `after` were reached after the wrap, so the last of them
    ended the sweep; otherwise the greatest group did. A worker's first sweep (`after`
    None) began at group `began`, inclusive. Nothing claimed: unchanged.
    """
    claimed = set(groups)
    if not claimed:
        return after
    if after is None:
        wrapped = [g for g in claimed if g < began]
    else:
        wrapped = [g for g in claimed if g <= after]
    return max(wrapped) if wrapped else max(claimed)


def start_between(first: str, last: str, roll: float) -> str:
    """A point of the group order between `first` and `last` (first < last), for `roll` in
    [0, 1): where a worker's first sweep begins. Workers that all began at one group would
    sweep in lockstep, each claim skipping the rows the one just ahead had locked (measured:
    half the drain rate with four workers); spread over the span they pass each other by.
    The point is drawn at the first character where the two differ, so it falls among
    real groups whatever their names look like."""
    common = 0
    while common < len(first) and first[common] == last[common]:
        common += 1
    # Past the end of `first` (a prefix of `last`, such as the shared group ''), the lowest
    # character is 1, not 0: PostgreSQL text cannot hold NUL, and the claim would fail.
    low = ord(first[common]) if common < len(first) else 1
    high = ord(last[common])
    return last[:common] + chr(min(high, low + int(roll * (high - low + 1))))


@dataclass(slots=True)
class FairState:
    """One worker's view of fairness per queue: its tenant sweep position, its position
    among the groups of the tenants it served last, and its cached probe."""

    ttl_seconds: float = GROUPS_TTL_SECONDS
    rand: Callable[[], float] = random.random
    after: dict[str, str | None] = field(default_factory=dict)
    mixed: dict[str, tuple[float, bool]] = field(default_factory=dict)
    positions: dict[str, dict[str, str]] = field(default_factory=dict)

    def mixed_known(self, queue: str) -> bool | None:
        """The cached answer for `queue` if still fresh, else None."""
        seen = self.mixed.get(queue)
        if seen is None or time.monotonic() - seen[0] >= self.ttl_seconds:
            return None
        return seen[1]

    def remember_mixed(self, queue: str, first: str | None, last: str | None) -> bool:
        """Note the first and last group (in sweep order) of a queue's best level; whether
        they differ. An empty queue is not remembered: the next jobs may come from any
        number of groups. A worker's first sweep starts at a random point between the two
        tenants, or, for one tenant's groups, between the two groups."""
        mixed = first != last
        if first is not None:
            self.mixed[queue] = (time.monotonic(), mixed)
        if mixed and first is not None and last is not None and queue not in self.after:
            low, high = tenant_of(first), tenant_of(last)
            if low != high:
                self.after[queue] = start_between(low, high, self.rand())
            else:
                self.positions.setdefault(queue, {})[low] = start_between(first, last, self.rand())
        return mixed

    def advance(self, queue: str, jobs: Sequence[Job]) -> None:
        """Move past the tenants, and each tenant's groups, that one fair claim of `queue`
        leased. A first claim began at the tenant of the best level's first job, the first
        of these in claim order; a tenant without a remembered position began after its
        bare key (its groups "<tenant>/...", then the wrap to "<tenant>" itself)."""
        began = tenant_of(min(jobs, key=claim_order).group_key) if jobs else ""
        by_tenant: dict[str, list[str]] = {}
        for job in jobs:
            by_tenant.setdefault(tenant_of(job.group_key), []).append(job.group_key)
        self.after[queue] = sweep_position(self.after.get(queue), by_tenant, began)
        positions = self.positions.setdefault(queue, {})
        for tenant, groups in by_tenant.items():
            # Without a position a tenant's groups resume after its bare key: the claim
            # needs (and is sent) only the others, so a tenant of one group costs nothing.
            position = sweep_position(positions.pop(tenant, tenant), groups)
            if position is not None and position != tenant:
                positions[tenant] = position  # re-inserted: the most recently served
        while len(positions) > TENANT_POSITIONS:
            del positions[next(iter(positions))]

    def positions_of(self, queue: str) -> list[str]:
        """The group served last in each remembered tenant of `queue`, for the claim."""
        return list(self.positions.get(queue, {}).values())


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group of one queue: jobs runnable now, jobs running, and how long its oldest
    runnable job has waited. The shared group (jobs without group or owner) is ''."""

    queue: str
    group: str
    waiting: int
    running: int
    oldest_runnable_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "group": self.group,
            "waiting": self.waiting,
            "running": self.running,
            "oldest_runnable_seconds": self.oldest_runnable_seconds,
        }


def most_starved(groups: Sequence[GroupStats]) -> GroupStats | None:
    """The group whose oldest runnable job has waited longest (None: nothing waits)."""
    waiting = [g for g in groups if g.oldest_runnable_seconds is not None]
    return max(waiting, key=lambda g: g.oldest_runnable_seconds or 0.0, default=None)
