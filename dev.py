#!/usr/bin/env python3
"""Two-command quickstart: `python3 dev.py demo` and `python3 dev.py test [pytest args]`.

Standard library only, so it runs before anything is installed. It keeps `.venv`
in the repository root up to date (re-installing when pyproject.toml changes) and
then hands over to the tool inside it.

    python3 dev.py demo              # run the demo against a throwaway PostgreSQL
    python3 dev.py test [args...]    # pytest, in parallel unless you pass -n
    python3 dev.py tickq [args...]   # any tickq command
    python3 dev.py setup             # only create / refresh the virtualenv
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

MIN_PYTHON = (3, 11)
ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VENV_BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
VENV_PYTHON = VENV_BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".tickq-install-stamp"
USAGE = "usage: python3 dev.py {demo | test [pytest args] | tickq [args] | setup}"


def step(message: str) -> None:
    print(f"dev.py: {message}", flush=True)


def run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, cwd=ROOT, check=False)
    if result.returncode != 0:
        sys.exit(f"dev.py: failed ({result.returncode}): {' '.join(cmd)}")


def install_stamp() -> str:
    """Hash of pyproject.toml: dependencies or entry points changed means reinstall."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_venv() -> None:
    """Create .venv if missing; install the project when new or pyproject.toml changed."""
    if not VENV_PYTHON.exists():
        step(f"creating virtualenv {VENV.relative_to(ROOT)} with {sys.executable}")
        STAMP.unlink(missing_ok=True)
        run([sys.executable, "-m", "venv", str(VENV)])
    wanted = install_stamp()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        step("virtualenv is up to date")
        return
    step('installing the project: pip install -e ".[test]" (first time takes a minute)')
    pip = [str(VENV_PYTHON), "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "install", "--quiet", "-e", ".[test]"])
    STAMP.write_text(wanted + "\n")


def has_worker_option(args: list[str]) -> bool:
    return any(a.startswith(("-n", "--numprocesses")) for a in args)


def hand_over(cmd: list[str]) -> None:
    """Replace this process with `cmd`, so signals and the exit code are the tool's own."""
    step("running " + " ".join([str(Path(cmd[0]).relative_to(ROOT)), *cmd[1:]]))
    os.chdir(ROOT)
    os.execv(cmd[0], cmd)


def main(argv: list[str]) -> None:
    if sys.version_info < MIN_PYTHON:
        sys.exit(
            f"dev.py: tickq needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+, "
            f"this is {sys.version.split()[0]} ({sys.executable})."
        )
    if not argv or argv[0] not in ("demo", "test", "tickq", "setup"):
        sys.exit(USAGE)
    command, rest = argv[0], argv[1:]
    ensure_venv()
    if command == "setup":
        return
    if command == "demo":
        hand_over([str(VENV_BIN / "tickq"), "demo", *rest])
    elif command == "tickq":
        hand_over([str(VENV_BIN / "tickq"), *rest])
    else:
        workers = [] if has_worker_option(rest) else ["-n", "auto"]
        hand_over([str(VENV_PYTHON), "-m", "pytest", *workers, *rest])


if __name__ == "__main__":
    main(sys.argv[1:])
