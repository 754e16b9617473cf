"""`tickq demo` shows durable steps: the long transcription crosses several ticks with each
part stored once, the publish job waits for its approval signal, and a workflow maps child
jobs and sums their results."""

from __future__ import annotations

import json

import psycopg
import pytest

from tickq.infra.cli.program import main


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

    # The workflow: four embed children, listed with the demo's jobs, summed by their parent
    corpus = jobs["index-corpus"]
    assert (corpus["status"], corpus["result"]) == ("succeeded", {"documents": 4, "vectors": 32})
    children = conn.execute(
        "select c.status, count(*) from tickq.job_children l join tickq.jobs c on c.id = l.child_id"
        " where l.parent_id = %s group by c.status",
        (corpus["id"],),
    ).fetchall()
    assert children == [("succeeded", 4)]
    listed = {j["id"] for j in shown["jobs"]}
    assert all(
        str(child) in listed
        for (child,) in conn.execute(
            "select child_id from tickq.job_children where parent_id = %s", (corpus["id"],)
        ).fetchall()
    )
