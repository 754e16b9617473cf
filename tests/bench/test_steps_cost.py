"""bench.steps_cost measures what it says, at small sizes (the before/after drain needs the
git history and is left to the benchmark run itself)."""

from __future__ import annotations


def test_durable_step_costs_are_measured(database_url: str, clean_tables: None) -> None:
    from bench.steps_cost import resume_cost, step_rates

    # Given a migrated database, when a small long job and a resumable job run
    steps = step_rates(database_url, steps=20)
    resume = resume_cost(database_url, steps=5)

    # Then every step ran once, was replayed from storage, and each claim was one resume
    assert steps["steps_per_s"] > 0 and steps["replayed_steps_per_s"] > 0
    assert (resume["claims"], resume["resumes"]) == (5, 4)
