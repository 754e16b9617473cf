"""The `tickq` command line under hostile arguments: a documented exit code and a message,
never a traceback, and a refused command writes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies as bad
from tests.fuzz.test_python_api import snapshot
from tests.model.profiles import budget
from tickq.infra.cli import program as cli

# Invalid UTF-8 in argv reaches Python as lone surrogates (surrogateescape).
arg = st.one_of(bad.sql_injection, bad.bad_text, st.text(max_size=30), bad.huge_int.map(str))
ENQUEUE_FLAGS = [
    "--payload",
    "--queue",
    "--key",
    "--priority",
    "--max-attempts",
    "--delay",
    "--run-after",
    "--user",
]
LIST_FLAGS = ["--status", "--type", "--queue", "--limit", "--cursor"]


def flags(names: list[str]) -> st.SearchStrategy[list[str]]:
    pair = st.tuples(st.sampled_from(names), arg).map(list)
    return st.lists(pair, max_size=3).map(lambda pairs: [x for p in pairs for x in p])


argv = st.one_of(
    st.tuples(st.just(["enqueue"]), arg.map(lambda a: [a]), flags(ENQUEUE_FLAGS)),
    st.tuples(st.just(["jobs"]), st.just([]), flags(LIST_FLAGS)),
    st.tuples(
        st.sampled_from([["show"], ["cancel"], ["retry"]]), arg.map(lambda a: [a]), st.just([])
    ),
    st.tuples(st.just(["retry", "--dead"]), st.just([]), flags(["--type", "--queue", "--limit"])),
).map(lambda parts: [x for part in parts for x in part])


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.delenv("TICKQ_TASK_MODULES", raising=False)


@budget(ci=80, long=3000)
@given(args=argv, as_json=st.booleans())
def test_cli_answers_hostile_arguments_with_an_exit_code_and_writes_nothing_on_refusal(
    conn: psycopg.Connection,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    as_json: bool,
) -> None:
    before = snapshot(conn)
    argv_ = ["--json", *args] if as_json else args
    try:
        code: Any = cli.main(argv_)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    captured = capsys.readouterr()
    assert code in (0, 1, 2, 3), (argv_, code, captured.err[-500:])
    assert "Traceback" not in captured.err
    if code != 0:
        assert captured.err.strip() or captured.out.strip(), "a refusal must say why"
        assert snapshot(conn) == before
