"""The timed-out error the runner writes reads back as how the handler was stopped, and no
other error does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queue_core.model.timed_out import STOPPED_BY, timed_out_error, timed_out_view


@given(seconds=st.integers(1, 43_200), how=st.sampled_from(STOPPED_BY))
def test_each_way_of_stopping_reads_back_from_its_error(seconds: int, how: str) -> None:
    error = timed_out_error(seconds, how)

    assert timed_out_view(error) == {"after_seconds": seconds, "stopped": how}


@pytest.mark.parametrize(
    "error",
    [
        None,
        "ValueError: timed out after 2 s (killed)",  # a handler's own failure, named by type
        "TimeoutError: timed out",
        "timed out after 2 s (cancelled) and more",
        "timed out after 2 s (stopped)",
        "lease expired",
    ],
)
def test_other_errors_are_not_a_timeout(error: str | None) -> None:
    assert timed_out_view(error) is None


def test_an_unknown_way_of_stopping_is_refused() -> None:
    with pytest.raises(ValueError, match="cancelled or killed or abandoned"):
        timed_out_error(2, "stopped")
