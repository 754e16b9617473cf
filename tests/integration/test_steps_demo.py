"""`tickq demo` shows durable steps: the long transcription crosses several ticks with each
part stored once, and the publish job waits for its approval signal."""

from __future__ import annotations

import json

import psycopg
import pytest

from tickq.infra.cli import main


def test_the_demo_runs_a_job_across_ticks_and_one_through_an_approval(
    conn: psycopg.Connection,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)

    assert main(["--json", "demo"]) == 0

    shown = json.loads(capsys.readouterr().out)
    jobs = {j["type"]: j for j in shown["jobs"]}
    assert jobs["transcribe-long"]["status"] == "succeeded"
    assert jobs["transcribe-long"]["attempts"] == 1
    assert jobs["publish"]["result"] == {
        "published": "Release notes 2.0",
        "approved_by": "editor@example.com",
    }
    row = conn.execute(
        "select j.resumes, count(s.name) from tickq.jobs j"
        " join tickq.job_steps s on s.job_id = j.id"
        " where j.type = 'transcribe-long' group by j.resumes"
    ).fetchone()
    assert row is not None and row[0] >= 1 and row[1] == 9  # fetch + 8 parts, once each
    assert shown["report"]["suspended"] >= 2 and shown["report"]["resumed"] >= 2
