"""What `sam build` ships, before and after: zipped sizes, and a cold import of each handler
from the build output, in one run.

Four builds by `sam build`, for this machine's architecture: the reference template
(template.yaml and its Makefile) and a `tickq init` application (written by that tree's own
`tickq init --requirement WHEEL`, from a wheel of that tree), each from the tree at
`--before` and from this working tree.

* Sizes: each function's package and DependenciesLayer, zipped (deflated) as `sam deploy`
  zips them, and their sum: what one deploy uploads and Lambda stores.
* Cold import: a fresh `python3.12 -S -s -B` per import (-B: nothing compiled at import is
  kept, as in Lambda's read-only /var/task) whose sys.path is the function's package, the
  layer's python/ when the build has one, and a boto3 folder standing for the runtime's
  (pip-installed and compiled, as the runtime's own); the milliseconds
  `import tickq.functions.<handler>` takes. Each round runs the four builds in an order
  that alternates; the first round only warms the page cache; medians of the others.

    python -m bench.artifact_cost --before REF [--rounds 7]

Needs the SAM CLI (.venv-sam/bin/sam or on PATH) and a python3.12 (on PATH or under pyenv).
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import platform
import shutil
import site
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = {
    "tick": "TickFunction",
    "api": "ApiFunction",
    "enqueue": "EnqueueFunction",
    "maintenance": "MaintenanceFunction",
    "scheduler": "SchedulerFunction",
    "migrate": "MigrateFunction",
}
# What `sam build` of the reference template reads, and what the wheel is built from.
TEMPLATE_SOURCES = ("functions", "queue_core", "infra", "Makefile", "template.yaml")
SHIPPED = ("pyproject.toml", "README.md", "queue_core", "functions", "infra")
IMPORT = (
    "import importlib, sys, time; sys.path[:0] = sys.argv[2:];"
    "began = time.perf_counter(); importlib.import_module(sys.argv[1]);"
    "print((time.perf_counter() - began) * 1000)"
)


@dataclass
class Build:
    """One `sam build` output and what was measured of it."""

    name: str
    output: Path
    task_modules: str
    build_seconds: float
    zipped: dict[str, int] = field(default_factory=dict)
    imports: dict[str, list[float]] = field(default_factory=dict)

    def import_path(self, function: str, runtime_boto3: Path) -> list[str]:
        layer = self.output / "DependenciesLayer" / "python"
        paths = [self.output / function, *([layer] if layer.is_dir() else []), runtime_boto3]
        return [str(p) for p in paths]


def tools() -> tuple[str, str]:
    """The SAM CLI and a Python 3.12."""
    local = ROOT / ".venv-sam" / "bin" / "sam"
    sam = str(local) if local.exists() else shutil.which("sam")
    candidates = [
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
    ]
    python = next((c for c in candidates if c and is_python312(c)), None)
    if sam is None or python is None:
        raise SystemExit("needs the SAM CLI (.venv-sam/bin/sam or on PATH) and a python3.12")
    return sam, python


def is_python312(candidate: str) -> bool:
    probe = subprocess.run(
        [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.stdout.strip() == "True"


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def archive(ref: str, dest: Path) -> Path:
    """The repository's tracked files at `ref`."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True, check=True
    ).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def copy(tree: Path, names: tuple[str, ...], dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in names:
        if (tree / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(tree / name, dest / name, ignore=ignore)
        else:
            shutil.copy(tree / name, dest / name)
    return dest


def for_this_machine(template: Path) -> None:
    """The template built for this machine's architecture (no cross-building)."""
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    template.write_text(template.read_text(encoding="utf-8").replace("arm64", arch))


def sam_build(directory: Path, sam: str, python: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL"))}
    env.update(
        PATH=f"{Path(python).parent}{os.pathsep}{env['PATH']}",
        SAM_CLI_TELEMETRY="0",
        AWS_DEFAULT_REGION="us-east-1",
    )
    began = time.perf_counter()
    run([sam, "build"], directory, env)
    return time.perf_counter() - began


def wheel_of(tree: Path, work: Path) -> Path:
    source = copy(tree, SHIPPED, work / "source")
    dist = work / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        work,
    )
    (wheel,) = dist.glob("tickq-*.whl")
    return wheel


def init_app(wheel: Path, app: Path) -> Path:
    """`tickq init APP --requirement WHEEL` run by the wheel's own tickq (no site: the
    editable install of this tree stays out; the site-packages folders give its
    dependencies)."""
    unpacked = app.parent / "installed"
    with zipfile.ZipFile(wheel) as archive_:
        archive_.extractall(unpacked)
    code = (
        "import sys; wheel, app, *site = sys.argv[1:]; sys.path[:0] = site;"
        "from tickq.infra.cli.program import main;"
        "raise SystemExit(main(['init', app, '--requirement', wheel]))"
    )
    folders = [str(wheel), str(app), str(unpacked), *site.getsitepackages()]
    run([sys.executable, "-S", "-c", code, *folders], app.parent)
    for_this_machine(app / "template.yaml")
    return app


def zipped(path: Path) -> int:
    """Bytes of the folder zipped as `sam deploy` zips it (deflated)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive_:
        for file in sorted(f for f in path.rglob("*") if f.is_file()):
            archive_.write(file, file.relative_to(path))
    return buffer.tell()


def runtime_boto3(python: str, dest: Path) -> Path:
    run([python, "-m", "pip", "install", "-q", "--target", str(dest), "boto3"], dest.parent)
    run([python, "-m", "compileall", "-q", "-j", "0", str(dest)], dest.parent)
    return dest


def import_ms(python: str, build: Build, handler: str, boto3: Path) -> float:
    env = {
        "PATH": "/usr/bin:/bin",
        "TICKQ_TASK_MODULES": build.task_modules,
        "TICKQ_TRACING": "PassThrough",
        "TICKQ_OTEL": "off",
        "POWERTOOLS_SERVICE_NAME": "tickq",
        "POWERTOOLS_METRICS_NAMESPACE": "tickq",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    paths = build.import_path(HANDLERS[handler], boto3)
    command = [python, "-S", "-s", "-B", "-c", IMPORT, f"tickq.functions.{handler}", *paths]
    return float(run(command, build.output, env).strip().splitlines()[-1])


def build_all(before: Path, work: Path, sam: str, python: str) -> list[Build]:
    builds = []
    for side, tree in (("before", before), ("after", ROOT)):
        reference = copy(tree, TEMPLATE_SOURCES, work / side / "reference")
        for_this_machine(reference / "template.yaml")
        seconds = sam_build(reference, sam, python)
        builds.append(
            Build(
                f"reference, {side}",
                reference / ".aws-sam" / "build",
                "tickq.functions.sample_tasks",
                seconds,
            )
        )
        wheel = wheel_of(tree, work / side / "wheel")
        app = init_app(wheel, work / side / "app")
        seconds = sam_build(app, sam, python)
        builds.append(Build(f"app, {side}", app / ".aws-sam" / "build", "tasks", seconds))
    for build in builds:
        for package in sorted(p for p in build.output.iterdir() if p.is_dir()):
            build.zipped[package.name] = zipped(package)
    return builds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.artifact_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the tree at this git ref beside")
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (after a warm-up)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be a positive integer")
    sam, python = tools()
    with tempfile.TemporaryDirectory(prefix="tickq-artifact-") as tmp:
        work = Path(tmp)
        ref = run(["git", "rev-parse", "--short", args.before], ROOT).strip()
        before = archive(ref, work / "tree")
        builds = build_all(before, work, sam, python)
        boto3 = runtime_boto3(python, work / "runtime-boto3")
        for round_ in range(args.rounds + 1):
            order = builds if round_ % 2 == 0 else builds[::-1]
            for handler in HANDLERS:
                for build in order:
                    ms = import_ms(python, build, handler, boto3)
                    if round_:
                        build.imports.setdefault(handler, []).append(ms)
        print(render(ref, builds, args.rounds))
    return 0


def render(before: str, builds: list[Build], rounds: int) -> str:
    by_name = {b.name: b for b in builds}
    lines = [
        f"cold import, ms (median of {rounds}; before = @{before}):",
        "",
        "| handler | reference before | after | ratio | app before | after | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for handler in HANDLERS:
        cells = []
        for kind in ("reference", "app"):
            b = statistics.median(by_name[f"{kind}, before"].imports[handler])
            a = statistics.median(by_name[f"{kind}, after"].imports[handler])
            cells.append(f"{b:.0f} | {a:.0f} | {a / b:.2f}")
        lines.append(f"| {handler} | {' | '.join(cells)} |")
    lines += [
        "",
        "zipped, MB:",
        "",
        "| package | reference before | after | app before | after |",
        "|---|---|---|---|---|",
    ]
    names = sorted({n for b in builds for n in b.zipped})
    order = [b.name for b in builds if b.name.startswith("reference")]
    order += [b.name for b in builds if b.name.startswith("app")]
    for package in [*names, "total"]:
        cells = []
        for name in order:
            sizes = by_name[name].zipped
            size = sum(sizes.values()) if package == "total" else sizes.get(package)
            cells.append("-" if size is None else f"{size / 1e6:.2f}")
        lines.append(f"| {package} | {' | '.join(cells)} |")
    seconds = ", ".join(f"{b.name} {b.build_seconds:.0f} s" for b in builds)
    lines += ["", f"sam build: {seconds}"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
