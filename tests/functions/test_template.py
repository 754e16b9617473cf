"""template.yaml: valid for CloudFormation, and every handler it names exists."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file

from tickq.infra.local_invoke import load_template, resolve_handler

from .conftest import EVENTS

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
SPEC_FUNCTIONS = {
    "TickFunction",
    "ApiFunction",
    "EnqueueFunction",
    "MaintenanceFunction",
    "MigrateFunction",
    "SchedulerFunction",
}


@pytest.fixture(scope="module")
def template() -> Any:
    return load_template(TEMPLATE)


def functions(template: Any) -> dict[str, Any]:
    return {
        name: resource.get("Properties") or {}
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def test_cfn_lint_passes() -> None:
    problems = [str(match) for match in lint_file(TEMPLATE)]
    assert problems == []


def test_every_handler_resolves_to_an_importable_callable(template: Any) -> None:
    for name, properties in functions(template).items():
        handler = properties.get("Handler") or template["Globals"]["Function"].get("Handler")
        assert callable(resolve_handler(handler)), name


def test_the_functions_of_the_spec_are_all_there(template: Any) -> None:
    assert set(functions(template)) >= SPEC_FUNCTIONS


def test_one_runtime_and_one_architecture_everywhere(template: Any) -> None:
    defaults = template["Globals"]["Function"]
    assert defaults["Runtime"] in ("python3.12", "python3.13")
    for name, properties in functions(template).items():
        assert properties.get("Runtime", defaults["Runtime"]) == defaults["Runtime"], name
        assert (
            properties.get("Architectures", defaults["Architectures"])
            == (defaults["Architectures"])
        ), name
    layer = template["Resources"]["DependenciesLayer"]
    assert layer["Properties"]["CompatibleArchitectures"] == defaults["Architectures"]
    assert layer["Metadata"]["BuildMethod"] == defaults["Runtime"]


def test_schedules_pass_explicit_json_input_and_ticks_are_never_retried(template: Any) -> None:
    for name, properties in functions(template).items():
        for event in (properties.get("Events") or {}).values():
            if event["Type"] == "ScheduleV2":
                assert isinstance(json.loads(event["Properties"]["Input"]), dict), name
    tick = functions(template)["TickFunction"]
    assert tick["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    assert tick["RecursiveLoop"] == "Allow"


def test_tick_lease_outlasts_its_timeout_plus_margin(template: Any) -> None:
    tick = functions(template)["TickFunction"]
    env = tick["Environment"]["Variables"]
    margin_seconds = int(env["TICKQ_SAFETY_MARGIN_MS"]) / 1000
    assert int(env["TICKQ_LEASE_SECONDS"]) > tick["Timeout"] + margin_seconds


def test_layer_requirements_match_the_packages_runtime_dependencies() -> None:
    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\[<>=~ ;]", r.strip(), maxsplit=1)[0].lower() for r in requirements}

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = names(project["dependencies"]) | names(project["optional-dependencies"]["aws"])
    layer = (ROOT / "infra" / "layer" / "requirements.txt").read_text(encoding="utf-8")
    listed = names([line for line in layer.splitlines() if line and not line.startswith("#")])
    # boto3 ships with the Lambda runtime; the CLI's table renderer and pool are not needed.
    assert wanted - listed <= {"boto3", "rich", "psycopg-pool"}
    assert listed <= wanted
    assert {"cronsim", "tzdata"} <= listed  # schedules; Lambda's OS has no zone database


@pytest.mark.parametrize("path", sorted(EVENTS.glob("*.json")), ids=lambda p: p.name)
def test_sample_events_are_json_objects(path: Path) -> None:
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
