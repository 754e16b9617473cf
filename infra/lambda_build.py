"""What `sam build` ships, and nothing more: the steps the Makefiles' targets run (the
repository's and the one `tickq init` writes), under the functions' own Python.

    python3.12 -I lambda_build.py layer ARTIFACTS [--in-functions tickq]
    python3.12 -I lambda_build.py function OUT [--app DIR] [--tickq SITE]
    python3.12 -I lambda_build.py compile DIR

* `layer`: ARTIFACTS/python holds what `pip install --report ARTIFACTS/pip-report.json`
  installed from the layer's requirements. It keeps the distributions the functions can
  import: those requested and what they require, where boto3, botocore and s3transfer come
  from the Lambda runtime (unless requested by name: a newer boto3 is then shipped, with
  its own dependencies) and tickq's own requirements are only those of its Lambda
  functions (not the command line's rich, nor the local, test or bench extras). Every
  other distribution is removed, file by file from its RECORD, as are the console scripts
  (bin/). `--in-functions NAME` removes that kept distribution's own files too (its
  requirements stay): the functions carry them.
* `function`: OUT gets the user's modules from the application folder DIR (below), and,
  from the tickq installed in SITE, its Lambda code (every file of tickq's RECORD but the
  command line, tickq.infra, and the metadata).
* each step ends by compiling OUT to bytecode (`compile`): `__pycache__/*.cpython-3XX.pyc`
  for this interpreter, which must be the runtime's, in unchecked-hash mode. The runtime
  then never compiles at import (a read-only /var/task could not keep the result), and
  never compares a timestamp: SAM zips every file with the same fixed date, which a
  timestamp-checked .pyc would never match.

The user's modules, in an application's folder: every `*.py` file at its top (but
`conftest.py`, `setup.py` and `test_*.py`), and every folder at its top whose name is an
identifier and that holds `__init__.py` or another `*.py` directly (a package, or a folder
of modules), copied whole but for `__pycache__`. Hidden folders and `tests`, `test`,
`events`, `vendor`, `build`, `dist` and `node_modules` are never code; a virtualenv holds
no `*.py` at its top. Data files belong inside a package.

Standard library only: the targets run this file before anything is installed beside it.
"""

from __future__ import annotations

import argparse
import json
import py_compile
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

# What the Lambda runtime provides: shipped only when a requirement names it itself.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
# tickq's requirements that its Lambda functions never import, and the extras they use.
TICKQ = "tickq"
TICKQ_COMMAND_LINE_ONLY = frozenset({"rich"})
TICKQ_LAMBDA_EXTRAS = frozenset({"aws", "otel"})
TICKQ_COMMAND_LINE = "tickq/infra/"
REPORT = "pip-report.json"

NOT_CODE = frozenset({"tests", "test", "events", "vendor", "build", "dist", "node_modules"})
NOT_CODE_FILES = frozenset({"conftest.py", "setup.py"})

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']|["']([^"']+)["']\s*==\s*extra\b""")


def normalize(name: str) -> str:
    """A distribution or extra name as packaging compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(line: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
    """A Requires-Dist line's name, extras, and the extras its marker asks for (empty: the
    edge holds whatever extras are active). Other markers count as true: a distribution
    they excluded was not installed, and one installed anyway is kept."""
    spec, _, marker = line.partition(";")
    match = _REQUIREMENT.match(spec)
    if match is None:
        return None
    extras = frozenset(normalize(e) for e in (match.group(2) or "").split(",") if e.strip())
    wanted = frozenset(normalize(a or b) for a, b in _EXTRA_MARKER.findall(marker))
    return normalize(match.group(1)), extras, wanted


def needed(report: Mapping[str, Any]) -> dict[str, set[str]]:
    """The distributions of a pip installation report that the functions can import, each
    with its active extras."""
    requires = {
        normalize(item["metadata"]["name"]): item["metadata"].get("requires_dist") or []
        for item in report["install"]
    }
    todo = [
        (
            normalize(item["metadata"]["name"]),
            {normalize(e) for e in item.get("requested_extras") or []},
        )
        for item in report["install"]
        if item.get("requested")
    ]
    kept: dict[str, set[str]] = {}
    while todo:
        name, extras = todo.pop()
        if name == TICKQ:
            extras &= TICKQ_LAMBDA_EXTRAS
        if name not in requires or (name in kept and extras <= kept[name]):
            continue
        active = kept.setdefault(name, set())
        active |= extras
        for line in requires[name]:
            edge = requirement(line)
            if edge is None or (edge[2] and not edge[2] & active):
                continue
            target, target_extras, _ = edge
            if target in RUNTIME_PROVIDED and name not in RUNTIME_PROVIDED:
                continue
            if name == TICKQ and target in TICKQ_COMMAND_LINE_ONLY:
                continue
            todo.append((target, set(target_extras)))
    return kept


def installed(site: Path) -> Iterator[tuple[str, Path]]:
    """Each distribution's normalized name and .dist-info folder in `site`."""
    for info in sorted(site.glob("*.dist-info")):
        metadata = HeaderParser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        yield normalize(metadata["Name"]), info


def recorded(site: Path, info: Path) -> Iterator[str]:
    """The files a distribution's RECORD lists, relative to `site` (those outside it, the
    console scripts, left out)."""
    for line in (info / "RECORD").read_text(encoding="utf-8").splitlines():
        path = line.rsplit(",", 2)[0].strip('"')
        if path and not path.startswith(("../", "/")):
            yield path


def remove(site: Path, paths: Iterable[str]) -> None:
    """Delete `paths` under `site`, then every folder that left empty."""
    folders: set[Path] = set()
    for relative in paths:
        path = site / relative
        if path.is_file() or path.is_symlink():
            path.unlink()
        folders.update(p for p in path.parents if site in p.parents)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def slim_layer(artifacts: Path, in_functions: Sequence[str] = ()) -> list[str]:
    """Remove from the layer what the functions never import; the names removed."""
    site = artifacts / "python"
    report_path = artifacts / REPORT
    kept = needed(json.loads(report_path.read_text(encoding="utf-8")))
    report_path.unlink()
    elsewhere = {normalize(n) for n in in_functions}
    removed = []
    for name, info in installed(site):
        if name in kept and name not in elsewhere:
            continue
        remove(site, recorded(site, info))
        shutil.rmtree(info, ignore_errors=True)
        removed.append(name)
    shutil.rmtree(site / "bin", ignore_errors=True)
    return removed


def user_modules(app: Path) -> list[Path]:
    """The application's own modules and packages at the top of `app` (see above)."""
    found = []
    for entry in sorted(app.iterdir()):
        if entry.name.startswith(".") or entry.name in NOT_CODE:
            continue
        if entry.is_file() and entry.suffix == ".py":
            if entry.name not in NOT_CODE_FILES and not entry.name.startswith("test_"):
                found.append(entry)
        elif entry.is_dir() and entry.name.isidentifier() and any(entry.glob("*.py")):
            found.append(entry)
    return found


def copy_user_modules(app: Path, out: Path) -> list[str]:
    names = []
    for entry in user_modules(app):
        if entry.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(entry, out / entry.name, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, out / entry.name)
        names.append(entry.name)
    return names


def copy_tickq(site: Path, out: Path) -> None:
    """tickq's Lambda code from the tickq installed in `site`: its RECORD's files but the
    command line and the metadata."""
    (info,) = [info for name, info in installed(site) if name == TICKQ]
    for relative in recorded(site, info):
        if relative.startswith(TICKQ_COMMAND_LINE) or ".dist-info/" in relative:
            continue
        if "__pycache__/" in relative:
            continue
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(site / relative, target)


def compile_tree(folder: Path) -> int:
    """Bytecode beside every source of `folder` for this interpreter; the files that did not
    compile (never imported as they are: a package's templates or samples)."""
    failed = 0
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        try:
            py_compile.compile(
                str(path),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
        except py_compile.PyCompileError:
            failed += 1
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lambda_build.py", description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    layer = steps.add_parser("layer", help="slim a layer pip installed into ARTIFACTS/python")
    layer.add_argument("artifacts", type=Path)
    layer.add_argument("--in-functions", action="append", default=[], metavar="NAME")
    function = steps.add_parser("function", help="a function's package in OUT")
    function.add_argument("out", type=Path)
    function.add_argument("--app", type=Path, help="the application folder (its own modules)")
    function.add_argument("--tickq", type=Path, metavar="SITE", help="where tickq is installed")
    compile_ = steps.add_parser("compile", help="bytecode for every source of DIR")
    compile_.add_argument("dir", type=Path)
    args = parser.parse_args(argv)

    if args.step == "layer":
        removed = slim_layer(args.artifacts, args.in_functions)
        print(f"layer: removed {', '.join(removed) or 'nothing'}")
        out = args.artifacts / "python"
    elif args.step == "function":
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        if args.tickq is not None:
            copy_tickq(args.tickq, out)
        if args.app is not None:
            modules = copy_user_modules(args.app, out)
            print(f"function: your modules {', '.join(modules) or 'none'}")
    else:
        out = args.dir
    failed = compile_tree(out)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    unusable = f" ({failed} did not compile)" if failed else ""
    print(f"compiled {out} for Python {version}{unusable}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
