"""What a new user does with tickq, from a wheel: install it into a fresh virtualenv, check
that it adds no generic top-level name, `tickq init` an application that has its own
`functions/` package, migrate a real PostgreSQL, enqueue, and run the user's handler
through `tickq invoke TickFunction`, `tickq tick` and `tickq work` from the application's
folder with no PYTHONPATH. Then (slow) `sam build` of that application and its
TickFunction handler imported from the build output alone, under Python 3.12.

The wheel is built from a copy of the sources the package ships; the virtualenv installs
it with its `aws` and `local` extras from pip's cache (and index) as any user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.artifact.sam import Loader, host_architecture, run, sam_and_python312, sam_environment
from tests.conftest import scratch_database

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "queue_core", "functions", "infra")
# The user's own package named like tickq's repository folder, the usual SAM layout.
USER_HANDLER = '''\
"""The user's handlers, in the user's own `functions` package."""

from queue_core import task


@task("report")
def report(job):
    return {"total": sum(job.payload["numbers"]), "by": __name__}
'''
TASK_MODULES = "tasks,functions.reports"


@dataclass(frozen=True)
class App:
    """The installed tickq and the user's application folder."""

    venv: Path
    directory: Path
    wheel: Path
    database_url: str

    def env(self) -> dict[str, str]:
        """A user's shell: the venv's bin first, no PYTHONPATH, no tickq settings but the
        database."""
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TICKQ_", "PYTHON", "VIRTUAL"))
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env["TICKQ_DATABASE_URL"] = self.database_url
        return env

    def tickq(self, *args: str, env: dict[str, str] | None = None) -> Any:
        """`tickq --json ARGS` in the application's folder; its JSON output."""
        done = subprocess.run(
            [str(self.venv / "bin" / "tickq"), "--json", *args],
            cwd=self.directory,
            env={**self.env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, f"tickq {' '.join(args)} failed:\n{done.stderr[-3000:]}"
        return json.loads(done.stdout)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """The venv's Python running `code` from a folder with nothing in it."""
        neutral = self.venv.parent / "neutral"
        neutral.mkdir(exist_ok=True)
        return subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code],
            cwd=neutral,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def build_wheel(work: Path) -> Path:
    """`pip wheel --no-deps` of a copy of what the package ships (no build/ in the repo)."""
    source = work / "source"
    source.mkdir()
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    dist = work / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], work, dict(os.environ))
    (wheel,) = dist.glob("tickq-*.whl")
    return wheel


@pytest.fixture(scope="module")
def app_database(pg_admin_url: str) -> Iterator[str]:
    """An empty database of its own: the user's `tickq migrate` creates the schema."""
    with scratch_database(pg_admin_url, "app") as url:
        yield url


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def install(wheel: Path, work: Path, extras: str) -> Path:
    """A fresh virtualenv in `work` with the wheel and its dependencies installed."""
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], work, dict(os.environ))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*pip, "install", f"{wheel}{extras}"], work, dict(os.environ), timeout=600)
    return venv


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """tickq installed without any extra."""
    return install(wheel, tmp_path_factory.mktemp("bare"), "")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, wheel: Path, app_database: str) -> App:
    """tickq installed from its wheel; `tickq init` run, the user's own `functions/`
    package written and named in TaskModules, and `tickq migrate` run, as the README says."""
    work = tmp_path_factory.mktemp("own-app")
    app = App(install(wheel, work, "[aws,local]"), work / "myapp", wheel, app_database)
    app.directory.mkdir()
    written = app.tickq("init", ".", "--requirement", str(wheel))
    assert written["requirement"] == f"./vendor/{wheel.name}[aws]"
    (app.directory / "functions").mkdir()
    (app.directory / "functions" / "__init__.py").write_text("")
    (app.directory / "functions" / "reports.py").write_text(USER_HANDLER)
    template = app.directory / "template.yaml"
    text = template.read_text()
    assert "    Default: tasks\n" in text
    template.write_text(text.replace("    Default: tasks\n", f"    Default: {TASK_MODULES}\n"))
    assert app.tickq("migrate")["applied"]  # a new database: the whole schema
    return app


def test_the_wheel_adds_no_generic_top_level_name(app: App) -> None:
    with zipfile.ZipFile(app.wheel) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
        names = set(wheel.namelist())

    assert tops == {"queue_core", "tickq", "tickq-0.1.0.dist-info"}
    assert "tickq/__init__.py" not in names  # a namespace: nothing of tickq's own at the top
    assert {
        "tickq/functions/tick.py",
        "tickq/infra/cli/program.py",
        "tickq/infra/app/template.yaml",
    } <= (names)
    for generic in ("functions", "infra"):
        done = app.python(f"import {generic}")
        assert done.returncode == 1 and f"No module named '{generic}'" in done.stderr
    done = app.python("import tickq.functions.tick, tickq.infra.cli.program, queue_core")
    assert done.returncode == 0, done.stderr


def test_the_users_handler_runs_through_invoke_tick_and_work(app: App) -> None:
    # Given: the application, with the user's own functions/ package beside tasks.py.
    # When: TickFunction runs locally, the Lambda way, from the application's folder.
    first = app.tickq("enqueue", "report", "--payload", '{"numbers": [1, 2, 3]}')
    invoked = app.tickq("invoke", "TickFunction", "--event", "events/tick.json")
    # ... and a CLI tick and a worker, naming the modules as TICKQ_TASK_MODULES.
    second = app.tickq("enqueue", "report", "--payload", '{"numbers": [4, 5]}')
    ticked = app.tickq("tick", env={"TICKQ_TASK_MODULES": TASK_MODULES})
    third = app.tickq("enqueue", "hello", "--payload", '{"name": "Ada"}')
    worked = app.tickq("work", "--until-empty", env={"TICKQ_TASK_MODULES": TASK_MODULES})

    # Then: each ran the user's handler, and the results are stored.
    assert invoked["succeeded"] == 1 and ticked["succeeded"] == 1 and worked["succeeded"] == 1
    with psycopg.connect(app.database_url) as conn:
        found = conn.execute(
            "select id::text, status, result from tickq.jobs where id = any(%s)",
            ([first["id"], second["id"], third["id"]],),
        ).fetchall()
    rows = {id_: (status, result) for id_, status, result in found}
    assert rows == {
        first["id"]: ("succeeded", {"total": 6, "by": "functions.reports"}),
        second["id"]: ("succeeded", {"total": 9, "by": "functions.reports"}),
        third["id"]: ("succeeded", {"greeting": "hello, Ada"}),
    }


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (
            ["serve", "--user", "alice"],
            "tickq serve needs aws_lambda_powertools, pydantic: pip install 'tickq[aws]'",
        ),
        (
            ["invoke", "TickFunction", "--event", "-"],
            "tickq invoke needs yaml, "
            "aws_lambda_powertools, pydantic: pip install 'tickq[aws,local]'",
        ),
        (["migrate"], "pip install 'tickq[local]' for the embedded one, or set TICKQ_DATABASE_URL"),
        (["demo"], "pip install 'tickq[local]' for the embedded one"),
    ],
    ids=["serve", "invoke", "migrate", "demo"],
)
def test_a_command_without_its_extra_says_which_in_one_line(
    bare: Path, command: list[str], says: str
) -> None:
    # Given: tickq installed without extras, and no database URL.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKQ_", "PYTHON"))}

    done = subprocess.run(
        [str(bare / "bin" / "tickq"), *command],
        cwd=bare.parent,
        env=env,
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and says in line, done.stderr


@pytest.mark.slow
def test_sam_build_of_the_application_runs_the_users_job_under_python_312(app: App) -> None:
    sam, py312 = sam_and_python312()
    template = app.directory / "template.yaml"
    template.write_text(host_architecture(template.read_text()))
    env = {k: v for k, v in sam_environment(py312).items() if not k.startswith("PYTHON")}
    run([sam, "build"], app.directory, env, timeout=1500)
    output = app.directory / ".aws-sam" / "build"
    built = yaml.load((output / "template.yaml").read_text(), Loader=Loader)
    tick = built["Resources"]["TickFunction"]["Properties"]
    handler = tick["Handler"]
    # The environment the template gives the function, where it is a literal (a lease
    # longer than the timeout, the Powertools names); references have no local value.
    variables = {
        **built["Globals"]["Function"]["Environment"]["Variables"],
        **tick["Environment"]["Variables"],
    }
    literal = {k: v for k, v in variables.items() if isinstance(v, str)}
    package = output / "TickFunction"
    layer = output / "DependenciesLayer" / "python"
    assert handler == "tickq.functions.tick.handler"
    # The user's modules beside tickq's Lambda code (not its command line), compiled; their
    # dependencies in the layer, but boto3, which the runtime gives.
    assert sorted(p.name for p in package.iterdir()) == [
        "__pycache__",  # tasks.py's
        "functions",
        "queue_core",
        "tasks.py",
        "tickq",
    ]
    assert [p.name for p in (package / "tickq").iterdir()] == ["functions"]
    assert (package / "functions" / "__pycache__" / "reports.cpython-312.pyc").is_file()
    assert not {"boto3", "botocore", "rich", "tickq", "queue_core"} & {
        p.name for p in layer.iterdir()
    }
    boto3 = app.directory.parent / "runtime-boto3"
    run([py312, "-m", "pip", "install", "-q", "--target", str(boto3), "boto3"], app.directory, env)
    job = app.tickq("enqueue", "report", "--payload", '{"numbers": [10, 20]}')

    done = subprocess.run(
        [
            py312,
            "-S",
            "-s",
            str(ROOT / "tests" / "artifact" / "run_built.py"),
            str(package),
            str(layer),
            str(boto3),
        ],
        input=json.dumps({"TickFunction": handler}),
        capture_output=True,
        text=True,
        env={
            **literal,
            "PATH": "/usr/bin:/bin",
            "TICKQ_DATABASE_URL": app.database_url,
            "TICKQ_TASK_MODULES": TASK_MODULES,  # the TaskModules default, as deployed
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ticked"]["succeeded"] == 1, result["ticked"]
    assert result["modules"]["functions.reports"].startswith(str(package)), result["modules"]
    for module in ("psycopg", "aws_lambda_powertools"):
        assert result["modules"][module].startswith(str(layer)), result["modules"]
    assert result["modules"]["boto3"].startswith(str(boto3)), result["modules"]
    with psycopg.connect(app.database_url) as conn:
        row = conn.execute(
            "select status, result from tickq.jobs where id = %s", (job["id"],)
        ).fetchone()
    assert row == ("succeeded", {"total": 30, "by": "functions.reports"})
