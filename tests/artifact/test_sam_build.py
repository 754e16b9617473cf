"""The deployed artifact, not the source tree: `sam validate --lint` and `sam build` on a
copy of the template for this machine's architecture; what each package holds (only what
the functions import, no boto3 or botocore, which the runtime gives, no command-line or
test libraries, bytecode for Python 3.12 beside every source) and its zipped size; then
every handler imported from the build output alone (function package + DependenciesLayer
+ boto3, as the runtime gives it) under Python 3.12, and ApiFunction and TickFunction run
from it against the test database, compiling nothing.

Needs aws-sam-cli (`.ci/run` installs it into .venv-sam) and a python3.12 interpreter
(`sam build` of a python3.12 layer without Docker uses it); without either the test skips,
saying which.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
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

# Never in a package: the runtime's (boto3, botocore, s3transfer), the command line's
# (rich and what it imports) and the tests'.
ABSENT = ("boto3", "botocore", "s3transfer", "rich", "pygments", "markdown_it", "pytest")
MB = 1024 * 1024

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    sam, py312 = sam_and_python312()
    work = tmp_path_factory.mktemp("sam")
    for name in ("functions", "queue_core"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "infra" / "layer", work / "infra" / "layer")
    shutil.copy(ROOT / "infra" / "lambda_build.py", work / "infra" / "lambda_build.py")
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
    magic = run([py312, "-c", "import importlib.util as u; print(u.MAGIC_NUMBER.hex())"], work, env)
    return {
        "output": output,
        "python": py312,
        "magic": bytes.fromhex(magic.strip()),
        "boto3": boto3_dir,
        "handlers": {n: handlers[n]["Properties"]["Handler"] for n in FUNCTIONS},
    }


def zipped(path: Path) -> int:
    """Bytes of the folder zipped as `sam deploy` zips it (deflated)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(f for f in path.rglob("*") if f.is_file()):
            archive.write(file, file.relative_to(path))
    return buffer.tell()


def assert_compiled_for(package: Path, magic: bytes) -> None:
    """Every source has its bytecode where Python 3.12 looks for it, in unchecked-hash mode
    (flags 0b01): imported as is, whatever the files' dates in the zip."""
    sources = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    assert sources
    for source in sources:
        cached = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        header = cached.read_bytes()[:8]
        assert header[:4] == magic and int.from_bytes(header[4:8], "little") == 0b01, cached


def assert_nothing_of(package: Path, names: tuple[str, ...]) -> None:
    tops = {p.name.split("-")[0].lower() for p in package.iterdir()}
    assert not tops & set(names), sorted(tops & set(names))


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
        assert_nothing_of(package, ABSENT)
        assert not list(package.rglob("test_*.py"))
        assert_compiled_for(package, built["magic"])
        sizes[name] = zipped(package)
    # The handlers run from one package below; the others are the same files.
    listings = {
        n: sorted(str(f.relative_to(output / n)) for f in (output / n).rglob("*"))
        for n in FUNCTIONS
    }
    assert all(listing == listings["ApiFunction"] for listing in listings.values())
    print("zipped sizes (bytes):", json.dumps(sizes))
    # About 0.7 MB zipped, half of it bytecode.
    assert max(sizes[n] for n in FUNCTIONS) < 1.5 * MB


def test_the_layer_holds_the_functions_dependencies_compiled_and_no_more(
    built: dict[str, Any],
) -> None:
    layer: Path = built["output"] / "DependenciesLayer"
    assert [p.name for p in layer.iterdir()] == ["python"]
    site = layer / "python"
    tops = {p.name for p in site.iterdir()}
    for wanted in ("psycopg", "psycopg_binary", "pydantic", "aws_lambda_powertools", "cronsim"):
        assert wanted in tops
    assert "aws_xray_sdk" in tops  # Tracing: Active; its botocore is the runtime's
    assert_nothing_of(site, (*ABSENT, "bin", "tickq", "queue_core", "urllib3", "dateutil"))
    assert_compiled_for(site, built["magic"])
    size = zipped(layer)
    print("zipped layer (bytes):", size)
    # About 11.4 MB zipped (26.6 MB with botocore and without bytecode).
    assert size < 16 * MB


def bytecode_of(output: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in output.rglob("*.pyc")}


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
    bytecode = bytecode_of(output)
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
    for name in ("boto3", "botocore"):  # the runtime's
        assert result["modules"][name].startswith(str(built["boto3"])), result["modules"]
    # Every module came with valid bytecode: Python wrote none (it may here, not in Lambda).
    assert bytecode_of(output) == bytecode
    row = conn.execute("select type, status, result from tickq.jobs").fetchone()
    assert row == ("echo", "succeeded", {"echo": {"built": True}})
