"""A job's timeout as every Python enqueue surface takes it: checked like lease_seconds,
filled from its task, and carried by a lease at least the timeout plus a margin."""

from __future__ import annotations

import pytest

from queue_core import Registry
from queue_core.errors import ConfigurationError, InvalidJob
from queue_core.model.jobs import TIMEOUT_LEASE_MARGIN
from queue_core.model.validation import MAX_LEASE_SECONDS, job_spec


def module_level_handler(job: object) -> None:
    """A handler a child process can import by name."""


def test_a_timeout_raises_a_shorter_lease_and_keeps_a_longer_one() -> None:
    assert job_spec("t", timeout=5).lease_seconds == 5 + TIMEOUT_LEASE_MARGIN
    assert job_spec("t", timeout=5, lease_seconds=3).lease_seconds == 5 + TIMEOUT_LEASE_MARGIN
    assert job_spec("t", timeout=5, lease_seconds=600).lease_seconds == 600
    assert job_spec("t", timeout=MAX_LEASE_SECONDS).lease_seconds == MAX_LEASE_SECONDS
    assert job_spec("t", lease_seconds=7).timeout_seconds is None
    assert job_spec("t", timeout=5).timeout_seconds == 5


@pytest.mark.parametrize("bad", [0, -1, 1.5, "5", True, MAX_LEASE_SECONDS + 1])
def test_a_bad_timeout_is_refused(bad: object) -> None:
    with pytest.raises(InvalidJob, match="timeout"):
        job_spec("t", timeout=bad)


def test_a_tasks_timeout_is_its_jobs_default_and_a_request_overrides_it() -> None:
    registry = Registry()
    registry.task("slow", timeout=30)(module_level_handler)
    assert registry.spec("slow").timeout_seconds == 30
    assert registry.spec("slow", timeout=2).timeout_seconds == 2
    batch = registry.batch([{"type": "slow"}, {"type": "slow", "timeout": 3}])
    assert [spec.timeout_seconds for spec in batch.bases] == [30, 3]


def test_process_isolation_needs_a_plain_function_a_child_can_import() -> None:
    registry = Registry()
    registry.task("ok", isolation="process", timeout=5)(module_level_handler)
    assert registry.tasks["ok"].isolation == "process"

    def nested(job: object) -> None: ...

    with pytest.raises(ConfigurationError, match="top level"):
        registry.task("nested", isolation="process")(nested)

    async def coroutine(job: object) -> None: ...

    with pytest.raises(ConfigurationError, match="top level"):
        registry.task("async", isolation="process")(coroutine)
    with pytest.raises(ConfigurationError, match="isolation"):
        registry.task("bad", isolation="fiber")
    with pytest.raises(ConfigurationError, match="transactional"):
        registry.task("tx", isolation="process", transactional=True)
