"""Two engines measured in one run: this tree's and another ref's, each in a subprocess of
its own (its queue_core first on the path) on a fresh database, taking turns round by
round, so each ratio compares like with like on a shared machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]


def run_child(admin_url: str, tree: Path, name: str, module: str, *args: int) -> Any:
    """`bench.<module>.child(url, *args)` with `tree`'s engine, on a fresh database: its JSON."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        f"from bench.{module} import child;"
        "print(json.dumps(child(sys.argv[3], *map(int, sys.argv[4:]))))"
    )
    with fresh_database(admin_url, f"{module}_{name}") as url:
        out = subprocess.run(
            [sys.executable, "-c", code, str(tree), str(ROOT), url, *map(str, args)],
            capture_output=True,
            text=True,
            check=True,
            cwd=tree,
            env={**os.environ, "PYTHONPATH": ""},
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(before: str, rounds: int, module: str, *args: int) -> dict[str, list[Any]]:
    """Each side's results of `rounds` runs of the module's child, before first in even
    rounds, after first in odd ones."""
    runs: dict[str, list[Any]] = {"before": [], "after": []}
    with tree_at(before) as old, env_or_local_server() as admin_url:
        trees = {"before": old, "after": ROOT}
        for round_ in range(rounds):
            order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            for side in order:
                runs[side].append(run_child(admin_url, trees[side], side, module, *args))
    return runs
