"""Break the engine on purpose, one mutant at a time, and see which proof notices.

    .venv/bin/python -m tests.mutants                       # every mutant, every proof
    .venv/bin/python -m tests.mutants --only reclaim-early  # one mutant
    .venv/bin/python -m tests.mutants --first-kill --out docs/mutants.md

Each mutant (catalog.py) is applied to a fresh copy of the tracked tree in a temporary
directory, never to the working tree. The proofs then run inside that copy, on its code:
the chaos soak (CI size), the model-based test (CI profile, derandomized), and the
mutant's targeted tests. A proof that fails kills the mutant. The unmutated copy runs the
same proofs first, so a kill means the mutant, not a broken baseline. Too long for the
default test run (a few minutes per mutant); run it when the engine or a proof changes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.mutants.catalog import MUTANTS, Edit, Mutant

ROOT = Path(__file__).resolve().parents[2]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-x"]
PROOFS: dict[str, list[str]] = {
    "soak": ["-s", "tests/chaos"],
    "model": ["tests/model"],
}
TIMEOUT_SECONDS = 1200
# Lines of a failed proof's output worth quoting: what the proof said was wrong.
EVIDENCE = re.compile(r"chaos soak violation: (.{0,160})|^E\s+(.{0,160})|^FAILED (.{0,160})")


@dataclass
class Verdict:
    proof: str
    outcome: str  # killed, survived or error
    seconds: float
    evidence: str = ""


@dataclass
class Row:
    mutant: Mutant
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def killed_by(self) -> list[str]:
        return [v.proof for v in self.verdicts if v.outcome == "killed"]


class MutantDoesNotApply(Exception):
    """The text a mutant replaces is no longer in the tree (or not exactly once)."""


def copy_tree(destination: Path) -> None:
    """Copy the tracked and new (not ignored) files: the tree as a fresh clone would see it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        target = destination / name
        if source.is_symlink():  # .typing/tickq: the installed names, inside the copy
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source.readlink())
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def edited_file(edit: Edit, tree: Path) -> Path:
    """The file an edit changes: its path, or, for a glob (the statement files), the one file
    of it that holds the edit's text."""
    if "*" not in edit.path:
        return tree / edit.path
    holding = [p for p in sorted(tree.glob(edit.path)) if edit.before in p.read_text()]
    if len(holding) != 1:
        names = ", ".join(str(p.relative_to(tree)) for p in holding) or "none"
        raise MutantDoesNotApply(f"{edit.path} holds the text in one file, not in: {names}")
    return holding[0]


def apply(mutant: Mutant, tree: Path) -> None:
    for edit in mutant.edits:
        path = edited_file(edit, tree)
        text = path.read_text()
        count = text.count(edit.before)
        if count != edit.count:
            raise MutantDoesNotApply(
                f"{mutant.name}: {edit.path} has the text {count} times, not {edit.count}"
            )
        path.write_text(text.replace(edit.before, edit.after))


def environment(tree: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TICKQ_")}
    # CI=true makes hypothesis derandomize, so a model-test verdict is repeatable; a kill
    # needs no shrinking (minutes on a database-backed state machine).
    return {
        **env,
        # The copy's folders under their installed names (tickq.functions, tickq.infra)
        # come before the working tree's editable install.
        "PYTHONPATH": os.pathsep.join([str(tree), str(tree / ".typing")]),
        "CI": "true",
        "TICKQ_HYPOTHESIS_PROFILE": "ci",
        "TICKQ_HYPOTHESIS_SHRINK": "0",
    }


def check_isolated(tree: Path) -> None:
    """The copy must import its own engine, not the working tree's editable install."""
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import queue_core, tickq.functions.tick as t; print(queue_core.__file__, t.__file__)",
        ],
        cwd=tree,
        env=environment(tree),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for path in found:
        if not path.startswith(str(tree)):
            sys.exit(f"mutants: the copy imports {path}, not its own engine and functions")


def run_proof(proof: str, args: list[str], tree: Path, logs: Path) -> Verdict:
    started = time.monotonic()
    log = logs / f"{proof.replace('/', '_')}.log"
    with log.open("w") as out:
        try:
            rc = subprocess.run(
                [*PYTEST, *args],
                cwd=tree,
                env=environment(tree),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_SECONDS,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    seconds = time.monotonic() - started
    outcome = {0: "survived", 1: "killed"}.get(rc, f"error (exit {rc})")
    return Verdict(proof, outcome, seconds, first_evidence(log) if rc == 1 else "")


def first_evidence(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        match = EVIDENCE.search(line)
        if match:
            return next(g for g in match.groups() if g).strip()
    return ""


def proofs_of(targeted: tuple[str, ...], chosen: list[str]) -> list[tuple[str, list[str]]]:
    return [(name, PROOFS[name]) for name in chosen] + [(path, [path]) for path in targeted]


def run_mutant(
    mutant: Mutant | None,
    chosen: list[str],
    first_kill: bool,
    logs: Path,
    targeted: tuple[str, ...] = (),
) -> list[Verdict]:
    name = mutant.name if mutant else "baseline"
    verdicts = []
    with tempfile.TemporaryDirectory(prefix=f"tickq-mutant-{name}-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        if mutant is not None:
            apply(mutant, tree)
        check_isolated(tree)
        (logs / name).mkdir(parents=True, exist_ok=True)
        for proof, args in proofs_of(mutant.targeted if mutant else targeted, chosen):
            verdict = run_proof(proof, args, tree, logs / name)
            verdicts.append(verdict)
            print(f"  {name}: {proof} {verdict.outcome} ({verdict.seconds:.0f} s)", flush=True)
            if first_kill and verdict.outcome == "killed":
                break
    return verdicts


def table(rows: list[Row], chosen: list[str]) -> str:
    lines = [
        "| mutant | what is broken | killed by | evidence (first line the proof printed) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        killers = ", ".join(row.killed_by) or (
            "survived (equivalent)" if row.mutant.equivalent else "**SURVIVED**"
        )
        tried = ", ".join(f"{v.proof}: {v.outcome}" for v in row.verdicts)
        evidence = next((v.evidence for v in row.verdicts if v.evidence), "")
        if row.mutant.equivalent:
            evidence = f"equivalent: {row.mutant.equivalent}"
        what = f"{row.mutant.what} (`{row.mutant.name}`)"
        lines.append(f"| {what} | {tried} | {killers} | {evidence.replace('|', '/')} |")
    lines[0] = "| mutant | proofs run | killed by | evidence (first line the proof printed) |"
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("--only", action="append", help="run this mutant (repeatable)")
    parser.add_argument("--proofs", default="soak,model", help="comma list of soak, model")
    parser.add_argument("--first-kill", action="store_true", help="stop at a mutant's first kill")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) here")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "tickq-mutants")
    args = parser.parse_args(argv)
    chosen = [p for p in args.proofs.split(",") if p]
    if unknown := set(chosen) - set(PROOFS):
        parser.error(f"unknown proofs {sorted(unknown)}; known: {sorted(PROOFS)}")
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.only and len(mutants) != len(set(args.only)):
        parser.error(f"unknown mutants; known: {[m.name for m in MUTANTS]}")
    print(f"mutants: logs in {args.logs}", flush=True)
    if not args.no_baseline:
        targeted = tuple(sorted({t for m in mutants for t in m.targeted}))
        baseline = run_mutant(None, chosen, False, args.logs, targeted)
        if any(v.outcome != "survived" for v in baseline):
            print("mutants: the unmutated engine fails a proof; fix that first", file=sys.stderr)
            return 2
    rows = [Row(m, run_mutant(m, chosen, args.first_kill, args.logs)) for m in mutants]
    text = table(rows, chosen)
    print(text)
    if args.out:
        args.out.write_text(text)
    alive = [r.mutant.name for r in rows if not r.killed_by and not r.mutant.equivalent]
    if alive:
        print(f"mutants: survived: {', '.join(alive)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
