"""Times in the command line's tables: local, with the zone named as the page names it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from tickq.infra.cli.common import when

AT = datetime(2026, 12, 2, 0, 27, 37, 901_000, tzinfo=UTC)


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("UTC", "2026-12-02 00:27:37 UTC"),
        ("Asia/Tokyo", "2026-12-02 09:27:37 UTC+9"),
        ("Asia/Kolkata", "2026-12-02 05:57:37 UTC+5:30"),
        ("America/St_Johns", "2026-12-01 20:57:37 UTC-3:30"),
    ],
)
def test_a_time_is_local_with_its_offset_named(
    zone: Callable[[str], None], name: str, shown: str
) -> None:
    zone(name)
    assert when(AT) == shown


def test_no_time_is_blank() -> None:
    assert when(None) == ""
