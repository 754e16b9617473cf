"""`tickq init DIR`: the application it writes is valid for CloudFormation, deploys the
reference template's functions from the user's folder, and bad input changes nothing."""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file

from tickq.infra.cli.common import EXIT_INPUT
from tickq.infra.cli.program import main
from tickq.infra.init_app import FILES, MANIFEST, REQUIREMENTS
from tickq.infra.local.invoke import function_config, load_template

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = sorted([*FILES.values(), REQUIREMENTS, MANIFEST])


def init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["--json", "init", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else None


def listing(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): p.read_text() for p in directory.rglob("*") if p.is_file()
    }


@pytest.fixture
def app(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, written = init(capsys, str(tmp_path / "myapp"))
    assert code == 0, written
    return tmp_path / "myapp"


def test_it_writes_the_application_naming_the_installed_tickq(app: Path) -> None:
    assert sorted(listing(app)) == WRITTEN
    requirements = (app / "requirements.txt").read_text().splitlines()
    assert f"tickq[aws]=={metadata.version('tickq')}" in requirements


def test_the_template_passes_cfn_lint(app: Path) -> None:
    assert [str(match) for match in lint_file(app / "template.yaml")] == []


def test_the_functions_are_tickqs_with_the_users_folder_as_code(app: Path) -> None:
    template = load_template(app / "template.yaml")
    tick = function_config(template, "TickFunction")

    assert template["Globals"]["Function"]["CodeUri"] == "."
    assert tick.handler == "tickq.functions.tick.handler"
    assert tick.environment["TICKQ_TASK_MODULES"] == "tasks"  # the sample module's name
    # The Makefile builds the user's modules and tickq's into each function, the rest of
    # requirements.txt into DependenciesLayer (beside OpenTelemetry's, when asked for).
    assert tick.code_uri == "."
    assert template["Resources"]["TickFunction"]["Metadata"] == {"BuildMethod": "makefile"}
    layer = template["Resources"]["DependenciesLayer"]
    assert layer["Properties"]["ContentUri"] == "."  # requirements.txt, and vendor/'s wheel
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert (app / "Makefile").read_text().count("build-DependenciesLayer:") == 1


def test_the_template_is_the_reference_one_but_for_where_the_code_comes_from(app: Path) -> None:
    reference = load_template(ROOT / "template.yaml")
    written = load_template(app / "template.yaml")

    # What differs: the layer's contents (requirements.txt, the folder's Makefile), the
    # sample tasks module, and the descriptions that say so.
    expected = copy.deepcopy(reference)
    layer = expected["Resources"]["DependenciesLayer"]["Properties"]
    layer["Description"] = written["Resources"]["DependenciesLayer"]["Properties"]["Description"]
    expected["Parameters"]["TaskModules"]["Default"] = "tasks"
    for template in (expected, written):
        del template["Description"]
        del template["Parameters"]["TaskModules"]["Description"]
    assert written == expected


def test_the_sample_module_registers_its_task(app: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile((app / "tasks.py").read_text(), "tasks.py", "exec"), namespace)

    assert namespace["hello"].__name__ == "hello"
    from queue_core.runner.registry import registry

    assert "hello" in registry.tasks


def test_a_wheel_file_is_vendored_and_named_by_a_relative_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = tmp_path / "dist" / "tickq-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK wheel bytes")

    code, written = init(capsys, str(tmp_path / "app"), "--requirement", str(wheel))

    assert code == 0
    line = "./vendor/tickq-0.1.0-py3-none-any.whl[aws]"
    assert written["requirement"] == line
    requirements = (tmp_path / "app" / REQUIREMENTS).read_text()
    assert line in requirements.splitlines()
    # Nothing of this machine's paths: the folder can be moved and committed.
    assert str(tmp_path) not in requirements and "file:" not in requirements
    assert (tmp_path / "app" / "vendor" / wheel.name).read_bytes() == b"PK wheel bytes"


def test_force_with_a_new_wheel_replaces_only_the_tickq_line_and_the_old_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "tickq-0.1.0-py3-none-any.whl", tmp_path / "tickq-0.2.0-py3-none-any.whl"
    old.write_bytes(b"old")
    new.write_bytes(b"new")
    app = tmp_path / "app"
    assert init(capsys, str(app), "--requirement", str(old))[0] == 0
    requirements = app / REQUIREMENTS
    requirements.write_text(requirements.read_text() + "numpy==2.1\n")

    code, _ = init(capsys, str(app), "--force", "--requirement", str(new))

    assert code == 0
    lines = requirements.read_text().splitlines()
    assert "./vendor/tickq-0.2.0-py3-none-any.whl[aws]" in lines and "numpy==2.1" in lines
    assert not any("0.1.0" in line for line in lines)
    assert sorted(p.name for p in (app / "vendor").iterdir()) == [new.name]


def test_an_index_spec_is_written_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, written = init(capsys, str(tmp_path / "app"), "--requirement", "tickq[aws]>=0.1,<1")

    assert (code, written["requirement"]) == (0, "tickq[aws]>=0.1,<1")


@pytest.mark.parametrize(
    ("requirement", "says"),
    [
        ("requests==2.0", "must name tickq"),
        ("", "is empty"),
        ("tickq\nrequests", "must name tickq"),
        ("/nowhere/tickq-0.1.0-py3-none-any.whl", "no file at"),
    ],
)
def test_a_bad_requirement_is_refused_with_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], requirement: str, says: str
) -> None:
    code, error = init(capsys, str(tmp_path / "app"), "--requirement", requirement)

    assert code == EXIT_INPUT
    assert says in error["message"]
    assert not (tmp_path / "app").exists()


def test_existing_files_are_kept_unless_forced(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app / "tasks.py").write_text("# mine\n")

    code, error = init(capsys, str(app))

    assert code == EXIT_INPUT
    assert "already has template.yaml, tasks.py" in error["message"]
    assert (app / "tasks.py").read_text() == "# mine\n"


def test_force_rewrites_only_the_files_the_user_did_not_change(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app / "tasks.py").write_text("# mine\n")
    template = app / "template.yaml"
    template.write_text(template.read_text() + "# my own comment\n")
    (app / "README.md").unlink()
    (app / "events" / "tick.json").write_text("{}")

    code, written = init(capsys, str(app), "--force")

    assert code == 0
    assert written["kept"] == ["events/tick.json", "tasks.py", "template.yaml"]
    assert (app / "tasks.py").read_text() == "# mine\n"
    assert template.read_text().endswith("# my own comment\n")
    assert (app / "README.md").is_file()  # gone, so written again
    assert "README.md" in written["files"] and "tasks.py" not in written["files"]


def test_force_rewrites_a_file_that_still_holds_what_init_wrote(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As an older tickq's init would have left it: the manifest says what it wrote then.
    manifest = json.loads((app / ".tickq-init.json").read_text())
    (app / "tasks.py").write_text("# what an older init wrote\n")
    manifest["files"]["tasks.py"] = hashlib.sha256(b"# what an older init wrote\n").hexdigest()
    (app / ".tickq-init.json").write_text(json.dumps(manifest))

    code, written = init(capsys, str(app), "--force")

    assert (code, written["kept"]) == (0, [])
    assert (app / "tasks.py").read_text() != "# what an older init wrote\n"


def test_a_file_where_the_folder_should_be_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").write_text("")

    code, error = init(capsys, str(tmp_path / "taken"))

    assert code == EXIT_INPUT
    assert "is not a directory" in error["message"]
