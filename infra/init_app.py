"""`tickq init DIR`: a ready SAM application for the user's own handlers.

The template's functions are tickq's own (their Handler strings name the installed
`tickq.functions`), their code is DIR itself plus `requirements.txt`, which names tickq,
so `sam build` in DIR packs the user's modules, tickq and its dependencies into each
function. The files come from package data (infra/app); nothing is written when one of
them exists already, unless asked to overwrite.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from .cli_common import UsageError, emit, out

# Package data -> where it goes in DIR.
FILES = {
    "app/template.yaml": "template.yaml",
    "app/tasks.py": "tasks.py",
    "app/README.md": "README.md",
    "events/tick.json": "events/tick.json",
}
REQUIREMENTS = "requirements.txt"
# A requirement that names tickq, with or without extras and a version or URL.
_TICKQ_REQUIREMENT = re.compile(r"tickq(\[[A-Za-z0-9_,\s-]*\])?\s*(([<>=!~]=?|===?|@).*)?")


@dataclass(frozen=True, slots=True)
class Written:
    directory: Path
    files: list[str]
    requirement: str


def default_requirement() -> str:
    """The installed tickq with the extra the Lambda functions need."""
    return f"tickq[aws]=={metadata.version('tickq')}"


def requirement_line(spec: str | None) -> str:
    """requirements.txt's line for tickq: an index spec as given, or a local wheel or
    sdist path as a direct reference (with the aws extra)."""
    if spec is None:
        return default_requirement()
    spec = spec.strip()
    if not spec:
        raise UsageError("--requirement is empty: give e.g. 'tickq[aws]==0.1.0' or a wheel")
    if spec.endswith((".whl", ".tar.gz", ".zip")) and "@" not in spec:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise UsageError(f"--requirement: no file at {spec}")
        if not path.name.lower().startswith("tickq-"):
            raise UsageError(f"--requirement: {path.name} is not a tickq distribution")
        return f"tickq[aws] @ {path.resolve().as_uri()}"
    if "\n" in spec or not _TICKQ_REQUIREMENT.fullmatch(spec):
        raise UsageError(
            f"--requirement must name tickq (e.g. 'tickq[aws]==0.1.0') or a tickq wheel "
            f"file, got {spec!r}"
        )
    return spec


def write_app(directory: Path, *, requirement: str | None = None, force: bool = False) -> Written:
    """Write the application into `directory`; refuse (writing nothing) when a file exists
    and `force` is not set."""
    line = requirement_line(requirement)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    targets = [*FILES.values(), REQUIREMENTS]
    existing = [name for name in targets if (directory / name).exists()]
    if existing and not force:
        raise UsageError(
            f"{directory} already has {', '.join(existing)}: nothing written "
            "(--force overwrites them)"
        )
    contents = {dest: _package_file(source) for source, dest in FILES.items()}
    contents[REQUIREMENTS] = (
        "# What `sam build` installs beside your code in each function: tickq (whose\n"
        "# functions the template runs) with its aws extra, then your own dependencies.\n"
        f"{line}\n"
    )
    try:
        for name, text in contents.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    return Written(directory, targets, line)


def _package_file(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def cmd_init(args: argparse.Namespace) -> int:
    written = write_app(Path(args.dir), requirement=args.requirement, force=args.force)

    def human() -> None:
        out.print(f"wrote a tickq application in {written.directory}:", markup=False)
        for name in written.files:
            out.print(f"  {name}", markup=False)
        out.print(
            f"requirements.txt names {written.requirement}. Next (README.md there):\n"
            f"  cd {written.directory}\n"
            "  tickq invoke TickFunction --event events/tick.json   run a tick here\n"
            "  sam build && sam deploy --guided                      deploy (order: README)",
            markup=False,
        )

    emit(
        args,
        {
            "directory": str(written.directory),
            "files": written.files,
            "requirement": written.requirement,
        },
        human,
    )
    return 0


def register(command: Callable[..., Any]) -> None:
    p = command(
        "init",
        cmd_init,
        "write a SAM application for your own handlers into DIR",
        "  tickq init myapp                            template.yaml, tasks.py, README.md, ...\n"
        "  tickq init . --requirement dist/tickq-0.1.0-py3-none-any.whl\n"
        "  tickq init myapp --force                    overwrite the files it writes",
    )
    p.add_argument("dir", metavar="DIR", help="the application's folder (created if missing)")
    p.add_argument(
        "--requirement",
        metavar="SPEC",
        help=f"how requirements.txt names tickq (default {default_requirement()}): "
        "an index spec, or a wheel file",
    )
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
