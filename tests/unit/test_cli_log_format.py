"""The command line's one-line log format keeps a failure's traceback: a 500 under `tickq
serve` or `tickq invoke` logs 'request failed' with the exception, and without its
traceback the user never learns the cause."""

from __future__ import annotations

import logging
import sys
from typing import Any

from tickq.infra.cli.program import _LogFormat


def record(exc_info: Any = None) -> logging.LogRecord:
    return logging.LogRecord("tickq", logging.ERROR, __file__, 1, "request failed", None, exc_info)


def test_a_logged_exception_keeps_its_traceback() -> None:
    try:
        raise FileNotFoundError("static/index.html")
    except FileNotFoundError:
        line = _LogFormat().format(record(sys.exc_info()))

    first, *rest = line.splitlines()
    assert first.endswith("error request failed")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "FileNotFoundError: static/index.html"


def test_a_plain_record_stays_one_line() -> None:
    assert len(_LogFormat().format(record()).splitlines()) == 1
