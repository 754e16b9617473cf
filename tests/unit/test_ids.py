"""Job ids: UUIDv7, time-ordered, made one at a time or a batch at once."""

from __future__ import annotations

import time

from queue_core.model.ids import new_id, new_ids


def test_a_batch_of_ids_are_distinct_version_7_uuids_of_the_current_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    ids = new_ids(1000)
    after = time.time_ns() // 1_000_000

    assert len(set(ids)) == 1000
    assert {u.version for u in ids} == {7}
    assert {u.variant for u in ids} == {"specified in RFC 4122"}
    assert all(before <= u.int >> 80 <= after for u in ids)


def test_batch_ids_sort_after_ids_made_earlier() -> None:
    earlier = new_id()
    time.sleep(0.002)

    assert all(u > earlier for u in new_ids(10))
