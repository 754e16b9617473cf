"""The deployed artifact, not the source tree: `sam validate --lint` and `sam build` on a
copy of the template for this machine's architecture, then every handler imported from
the build output alone (function package + DependenciesLayer + boto3, as the runtime
gives it) under Python 3.12, and ApiFunction and TickFunction run from it against the
test database.

Needs aws-sam-cli (`.ci/run` installs it into .venv-sam) and a python3.12 interpreter
(`sam build` of a python3.12 layer without Docker uses it); without either the test skips,
saying which.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.artifact.sam import Loader, host_architecture, run, sam_and_python312, sam_environment

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = (
    "TickFunction",
    "ApiFunction",
    "EnqueueFunction",
    "MaintenanceFunction",
    "SchedulerFunction",
    "MigrateFunction",
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    sam, py312 = sam_and_python312()
    work = tmp_path_factory.mktemp("sam")
    for name in ("functions", "queue_core"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "infra" / "layer", work / "infra" / "layer")
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    template = (ROOT / "template.yaml").read_text(encoding="utf-8")
    (work / "template.yaml").write_text(host_architecture(template), encoding="utf-8")
    env = sam_environment(py312)
    run([sam, "validate", "--lint"], work, env)
    run([sam, "build"], work, env)
    boto3_dir = work / "runtime-boto3"
    run([py312, "-m", "pip", "install", "-q", "--target", str(boto3_dir), "boto3"], work, env)
    output = work / ".aws-sam" / "build"
    handlers = yaml.load((output / "template.yaml").read_text(), Loader=Loader)["Resources"]
    return {
        "output": output,
        "python": py312,
        "boto3": boto3_dir,
        "handlers": {n: handlers[n]["Properties"]["Handler"] for n in FUNCTIONS},
    }


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_each_function_package_holds_only_what_the_functions_import(
    built: dict[str, Any],
) -> None:
    output: Path = built["output"]
    sizes = {}
    for name in FUNCTIONS:
        package = output / name
        # Laid out as installed: the Handler strings name tickq.functions.*.
        assert sorted(p.name for p in package.iterdir()) == ["queue_core", "tickq"]
        assert [p.name for p in (package / "tickq").iterdir()] == ["functions"]
        assert not list(package.rglob("test_*.py"))
        sizes[name] = size(package)
    # The handlers run from one package below; the others are the same files.
    listings = {
        n: sorted(str(f.relative_to(output / n)) for f in (output / n).rglob("*"))
        for n in FUNCTIONS
    }
    assert all(listing == listings["ApiFunction"] for listing in listings.values())
    sizes["DependenciesLayer"] = size(output / "DependenciesLayer")
    print("package sizes (bytes):", json.dumps(sizes))
    assert max(sizes[n] for n in FUNCTIONS) < 2 * 1024 * 1024


def test_the_built_functions_run_under_python_312_from_the_artifact_alone(
    built: dict[str, Any], database_url: str, conn: psycopg.Connection
) -> None:
    output: Path = built["output"]
    env = {
        "PATH": "/usr/bin:/bin",
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_TASK_MODULES": "tickq.functions.sample_tasks",
        "TICKQ_PREPARE_THRESHOLD": "off",
        "TICKQ_LEASE_SECONDS": "180",  # as the template sets it for TickFunction
        "POWERTOOLS_SERVICE_NAME": "tickq",
        "POWERTOOLS_METRICS_NAMESPACE": "tickq",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    done = subprocess.run(
        [
            built["python"],
            "-S",
            "-s",
            str(ROOT / "tests" / "artifact" / "run_built.py"),
            str(output / "ApiFunction"),
            str(output / "DependenciesLayer" / "python"),
            str(built["boto3"]),
        ],
        input=json.dumps(built["handlers"]),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])

    assert result["posted"]["statusCode"] == 202, result["posted"]
    assert result["ticked"]["succeeded"] == 1, result["ticked"]
    layer = str(output / "DependenciesLayer")
    for name in ("psycopg", "pydantic", "aws_lambda_powertools"):
        assert result["modules"][name].startswith(layer), result["modules"]
    row = conn.execute("select type, status, result from tickq.jobs").fetchone()
    assert row == ("echo", "succeeded", {"echo": {"built": True}})
