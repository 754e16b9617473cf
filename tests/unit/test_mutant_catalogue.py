"""Every mutant of the catalogue applies to the tree as it is: an edit whose text has moved or
changed would otherwise be found only by the catalogue's own long run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.mutants.__main__ import MutantDoesNotApply, apply, edited_file
from tests.mutants.catalog import MUTANTS, Edit, Mutant

ROOT = Path(__file__).resolve().parents[2]


def test_every_mutant_applies_to_the_tree(tmp_path: Path) -> None:
    failed = []
    for mutant in MUTANTS:
        for edit in mutant.edits:
            try:
                path = edited_file(edit, ROOT)
            except MutantDoesNotApply as exc:
                failed.append(f"{mutant.name}: {exc}")
                continue
            count = path.read_text().count(edit.before)
            if count != edit.count:
                failed.append(f"{mutant.name}: {edit.path} has the text {count} times")
    assert not failed, "\n".join(failed)


def test_an_edit_of_the_statement_files_changes_the_one_holding_its_text(
    tmp_path: Path,
) -> None:
    for name in ("postgres", "policies"):
        (tmp_path / "queue_core" / name).mkdir(parents=True)
    (tmp_path / "queue_core/postgres/claim.sql").write_text("select 1 -- claim\n")
    (tmp_path / "queue_core/policies/limits.sql").write_text("select 2 -- limits\n")
    mutant = Mutant("m", "w", (Edit("queue_core/*/*.sql", "select 2", "select 3"),))

    apply(mutant, tmp_path)

    assert (tmp_path / "queue_core/policies/limits.sql").read_text() == "select 3 -- limits\n"
    assert (tmp_path / "queue_core/postgres/claim.sql").read_text() == "select 1 -- claim\n"
    with pytest.raises(MutantDoesNotApply, match="not in: none"):
        apply(Mutant("n", "w", (Edit("queue_core/*/*.sql", "select 9", "x"),)), tmp_path)
    shutil.rmtree(tmp_path / "queue_core")
