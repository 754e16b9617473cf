"""JobBatch: enqueue requests as base specs plus each job's own payload and key."""

from __future__ import annotations

from queue_core.model.job_batch import JobBatch
from queue_core.model.validation import job_spec


def test_a_batch_of_specs_gives_back_the_same_specs() -> None:
    specs = [job_spec("a", {"n": 1}, idempotency_key="k"), job_spec("b", queue="q")]

    assert JobBatch.of(specs).specs() == specs


def test_jobs_on_one_base_share_it_and_jobs_on_two_do_not() -> None:
    base = job_spec("a")
    one = JobBatch([base, base], ["{}", '{"n":1}'], ["k1", None])
    two = JobBatch([base, job_spec("b")], ["{}", "{}"], [None, None])

    assert one.shared_base() is base
    assert two.shared_base() is None


def test_taking_jobs_keeps_each_ones_payload_and_key() -> None:
    batch = JobBatch(
        [job_spec("a"), job_spec("b"), job_spec("c")], ["1", "2", "3"], ["x", None, "z"]
    )

    taken = batch.take([0, 2])

    assert [s.type for s in taken.specs()] == ["a", "c"]
    assert (taken.payloads, taken.keys) == (["1", "3"], ["x", "z"])
    assert batch.take([0, 1, 2]) is batch
