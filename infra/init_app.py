"""`tickq init DIR`: a ready SAM application for the user's own handlers.

The template's functions are tickq's own (their Handler strings name the installed
`tickq.functions`), their code is DIR itself plus `requirements.txt`, which names tickq,
so `sam build` in DIR packs the user's modules, tickq and its dependencies into each
function. The files come from package data (infra/app); nothing is written when one of
them exists already, unless forced, and even then a file the user changed is kept: a
manifest (.tickq-init.json) records what each file held when init wrote it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from tickq.infra.cli.common import UsageError, emit, out

# Package data -> where it goes in DIR.
FILES = {
    "app/template.yaml": "template.yaml",
    "app/tasks.py": "tasks.py",
    "app/README.md": "README.md",
    "app/Makefile": "Makefile",
    "events/tick.json": "events/tick.json",
}
REQUIREMENTS = "requirements.txt"
# What each file held when `init` wrote it (sha256), so `--force` can tell a file the user
# changed (kept) from one it may rewrite.
MANIFEST = ".tickq-init.json"
VENDOR = "vendor"
# A requirement that names tickq, with or without extras and a version or URL.
_TICKQ_REQUIREMENT = re.compile(r"tickq(\[[A-Za-z0-9_,\s-]*\])?\s*(([<>=!~]=?|===?|@).*)?")
# requirements.txt's line for tickq as an earlier `init` may have written it: an index spec,
# a direct reference, or a vendored distribution's relative path.
_TICKQ_LINE = re.compile(
    r"\s*(tickq(\[[^\]]*\])?\s*([<>=!~@].*)?|\S*/tickq-[^/\s]+\.(whl|tar\.gz|zip)(\[[^\]]*\])?)\s*"
)
_DISTRIBUTION = re.compile(r"tickq-[0-9][^/\\]*\.(whl|tar\.gz|zip)")


@dataclass(frozen=True, slots=True)
class Requirement:
    """requirements.txt's line for tickq, and the distribution file to vendor, if any."""

    line: str
    vendored: Path | None = None


@dataclass(frozen=True, slots=True)
class Written:
    directory: Path
    files: list[str]
    requirement: str
    kept: list[str] = field(default_factory=list)


def default_requirement() -> str:
    """The installed tickq with the extra the Lambda functions need."""
    return f"tickq[aws]=={metadata.version('tickq')}"


def requirement_line(spec: str | None) -> Requirement:
    """requirements.txt's line for tickq: an index spec as given, or a local wheel or sdist
    copied into the application's vendor/ folder and named by its path there, so the folder
    can be moved, committed and built anywhere."""
    if spec is None:
        return Requirement(default_requirement())
    spec = spec.strip()
    if not spec:
        raise UsageError("--requirement is empty: give e.g. 'tickq[aws]==0.1.0' or a wheel")
    if spec.endswith((".whl", ".tar.gz", ".zip")) and "@" not in spec:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise UsageError(f"--requirement: no file at {spec}")
        if not _DISTRIBUTION.fullmatch(path.name.lower()):
            raise UsageError(f"--requirement: {path.name} is not a tickq distribution")
        return Requirement(f"./{VENDOR}/{path.name}[aws]", path.resolve())
    if "\n" in spec or not _TICKQ_REQUIREMENT.fullmatch(spec):
        raise UsageError(
            f"--requirement must name tickq (e.g. 'tickq[aws]==0.1.0') or a tickq wheel "
            f"file, got {spec!r}"
        )
    return Requirement(spec)


REQUIREMENTS_HEADER = (
    "# What `sam build` installs for your functions: tickq (whose functions the template\n"
    "# runs) with its aws extra, then your own dependencies (add them below).\n"
    "# Until tickq is on a package index, name a wheel: `tickq init . --force\n"
    "# --requirement path/to/tickq-X-py3-none-any.whl` copies it into vendor/ and writes\n"
    "# its relative path here (README.md, 'Where tickq comes from').\n"
)


def write_app(directory: Path, *, requirement: str | None = None, force: bool = False) -> Written:
    """Write the application into `directory`; refuse (writing nothing) when a file exists
    and `force` is not set. With `force`, a file is rewritten only when it still holds what
    an earlier `init` wrote; the others are kept and listed. requirements.txt is the user's
    too: only its tickq line changes."""
    wanted = requirement_line(requirement)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    contents: dict[str, bytes] = {
        dest: _package_file(source).encode() for source, dest in FILES.items()
    }
    if wanted.vendored is not None:
        contents[f"{VENDOR}/{wanted.vendored.name}"] = _read(wanted.vendored)
    contents[REQUIREMENTS] = _requirements(directory / REQUIREMENTS, wanted.line).encode()
    existing = [name for name in [*FILES.values(), REQUIREMENTS] if (directory / name).exists()]
    if existing and not force:
        raise UsageError(
            f"{directory} already has {', '.join(existing)}: nothing written "
            "(--force rewrites those you have not changed and the tickq line of "
            "requirements.txt)"
        )
    recorded = _manifest(directory)
    kept = [
        name
        for name, data in contents.items()
        if name != REQUIREMENTS and _changed_by_user(directory / name, data, recorded.get(name))
    ]
    stale = [
        name
        for name, digest in recorded.items()
        if name.startswith(f"{VENDOR}/")
        and name not in contents
        and (directory / name).is_file()
        and _digest(_read(directory / name)) == digest
    ]
    written = {name: data for name, data in contents.items() if name not in kept}
    manifest = {n: d for n, d in recorded.items() if n not in stale}
    manifest.update({name: _digest(data) for name, data in written.items()})
    try:
        for name, data in written.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for name in stale:
            (directory / name).unlink()
        (directory / MANIFEST).write_text(
            json.dumps({"tickq": metadata.version("tickq"), "files": manifest}, indent=2) + "\n",
            encoding="utf-8",
        )
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    return Written(directory, sorted(written), wanted.line, sorted(kept))


def _requirements(path: Path, line: str) -> str:
    """A new requirements.txt, or the user's with its tickq line replaced (added first
    when it has none), every other line as it was."""
    if not path.is_file():
        return f"{REQUIREMENTS_HEADER}{line}\n"
    lines = _read(path).decode("utf-8", errors="replace").splitlines()
    kept = [text for text in lines if not _TICKQ_LINE.fullmatch(text)]
    at = next((i for i, text in enumerate(kept) if not text.startswith("#")), len(kept))
    return "\n".join([*kept[:at], line, *kept[at:]]) + "\n"


def _changed_by_user(path: Path, new: bytes, recorded: str | None) -> bool:
    """Whether `path` holds something neither an earlier `init` (by the manifest) nor this
    one would write: the user's own, never overwritten."""
    if not path.is_file():
        return path.exists()
    digest = _digest(_read(path))
    return digest not in {recorded, _digest(new)}


def _manifest(directory: Path) -> dict[str, str]:
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items()}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename}: {exc.strerror}") from None


def _package_file(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def cmd_init(args: argparse.Namespace) -> int:
    written = write_app(Path(args.dir), requirement=args.requirement, force=args.force)

    def human() -> None:
        out.print(f"wrote a tickq application in {written.directory}:", markup=False)
        for name in written.files:
            out.print(f"  {name}", markup=False)
        for name in written.kept:
            out.print(f"  {name}: kept (changed since tickq init wrote it)", markup=False)
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
            "kept": written.kept,
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
        "  tickq init myapp --force                    rewrite the files you have not changed",
    )
    p.add_argument("dir", metavar="DIR", help="the application's folder (created if missing)")
    p.add_argument(
        "--requirement",
        metavar="SPEC",
        help=f"how requirements.txt names tickq (default {default_requirement()}): "
        "an index spec, or a wheel file (copied into DIR/vendor, named by its relative path)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rewrite the files that still hold what an earlier init wrote, and the tickq line "
        "of requirements.txt; files you changed are kept and listed",
    )
