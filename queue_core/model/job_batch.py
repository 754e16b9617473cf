"""A batch of validated enqueue requests, in the shape bulk enqueue sends them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from uuid import UUID

from queue_core.model.jobs import JobSpec


@dataclass(frozen=True, slots=True)
class JobBatch:
    """Job i is `bases[i]` with its own payload and idempotency key.

    Requests of one type share one base spec (the type's defaults), so what a whole batch
    shares is known without comparing every job field by field, and no spec is built per job.
    """

    bases: list[JobSpec]
    payloads: list[str]
    keys: list[str | None]

    @classmethod
    def of(cls, specs: Sequence[JobSpec]) -> JobBatch:
        return cls(
            list(specs),
            [spec.payload_json for spec in specs],
            [spec.idempotency_key for spec in specs],
        )

    def __len__(self) -> int:
        return len(self.bases)

    def shared_base(self) -> JobSpec | None:
        """The one base every job has, or None when they differ."""
        first = self.bases[0]
        return first if self.bases.count(first) == len(self.bases) else None

    def user_ids(self) -> list[UUID | None]:
        return [base.user_id for base in self.bases]

    def take(self, indices: Sequence[int]) -> JobBatch:
        if len(indices) == len(self.bases):
            return self
        return JobBatch(
            [self.bases[i] for i in indices],
            [self.payloads[i] for i in indices],
            [self.keys[i] for i in indices],
        )

    def specs(self) -> list[JobSpec]:
        """Each job as a spec of its own (for callers that inspect requests, not the hot path)."""
        return [
            replace(base, payload_json=payload, idempotency_key=key)
            for base, payload, key in zip(self.bases, self.payloads, self.keys, strict=True)
        ]
