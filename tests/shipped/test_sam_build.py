"""`sam build` of the application `tickq init` wrote (its requirements naming the built
wheel), then every function run from the build output alone under Python 3.12: each
Handler imports from the function's folder and its layers (.aws-sam/build/<Layer>/python),
and so do queue_core and the application's task modules; the built ApiFunction serves the
console's script and the built TickFunction drains a job of the application's task.

Nothing here assumes how the application builds (pip from requirements.txt, a Makefile, a
dependencies layer): the folders come from the built template. Needs aws-sam-cli and a
python3.12 interpreter; without either it skips, saying which.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.artifact.sam import host_architecture, sam_and_python312

from .conftest import (
    INSTALL_TIMEOUT,
    LOCAL_AWS,
    App,
    Ran,
    base_environment,
    function_names,
    load_template,
    made_once,
    resources_of_type,
    run_command,
)

pytestmark = pytest.mark.slow

RUNNER = Path(__file__).resolve().parent / "run_built_app.py"
LAYER_TYPES = ("AWS::Serverless::LayerVersion", "AWS::Lambda::LayerVersion")


@dataclass(frozen=True)
class Built:
    output: Path  # .aws-sam/build
    template: dict[str, Any]  # the built template
    python: str  # python3.12
    runtime: list[Path]  # what the Lambda runtime adds (boto3), when the build lacks it
    setup: list[str]  # the shell commands that made it

    @property
    def functions(self) -> list[str]:
        return sorted(function_names(self.template))

    def function_dir(self, name: str) -> Path:
        code = self.template["Resources"][name]["Properties"].get("CodeUri")
        return self.output / (code if isinstance(code, str) else name)

    def layer_dirs(self, name: str) -> list[Path]:
        """The built folders of the function's layers (their python/ folder when there is
        one, as Lambda puts /opt/python on the import path)."""
        layers: dict[str, Any] = {}
        for kind in LAYER_TYPES:
            layers |= resources_of_type(self.template, kind)
        common = ((self.template.get("Globals") or {}).get("Function") or {}).get("Layers")
        own = self.template["Resources"][name]["Properties"].get("Layers")
        found = []
        for ref in dict.fromkeys(references([common, own])):
            if ref in layers:
                content = (layers[ref].get("Properties") or {}).get("ContentUri")
                base = self.output / (content if isinstance(content, str) else ref)
                found.append(base / "python" if (base / "python").is_dir() else base)
        return found

    def paths(self, name: str) -> list[Path]:
        return [self.function_dir(name), *self.layer_dirs(name), *self.runtime]

    def task_modules(self, name: str) -> list[str]:
        """TICKQ_TASK_MODULES as the function's environment sets it (parameter defaults)."""
        common = ((self.template.get("Globals") or {}).get("Function") or {}).get("Environment")
        own = self.template["Resources"][name]["Properties"].get("Environment")
        value = None
        for environment in (common, own):
            variables = (environment or {}).get("Variables") or {}
            value = variables.get("TICKQ_TASK_MODULES", value)
        if isinstance(value, dict) and isinstance(value.get("Ref"), str):
            parameter = (self.template.get("Parameters") or {}).get(value["Ref"]) or {}
            value = parameter.get("Default")
        return [m.strip() for m in str(value or "").split(",") if m.strip()]


def references(value: Any) -> Iterator[str]:
    """Every name a {"Ref": name} inside `value` refers to (through !If and lists)."""
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str) and len(value) == 1:
            yield value["Ref"]
        else:
            for item in value.values():
                yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


@pytest.fixture(scope="module")
def built(app: App, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The application built once per session (a copy of it, for this machine's
    architecture: no cross-building)."""
    sam, py312 = sam_and_python312()

    def make(folder: Path) -> dict[str, Any]:
        source = folder / "app"
        shutil.copytree(
            app.directory, source, ignore=shutil.ignore_patterns(".aws-sam", "__pycache__")
        )
        template = source / "template.yaml"
        text = template.read_text(encoding="utf-8")
        template.write_text(host_architecture(text), encoding="utf-8")
        setup = [
            *app.setup,
            f"cp -r {shlex.quote(str(app.directory))} {shlex.quote(str(source))}",
            f"sed -i 's/arm64/{host_architecture('arm64')}/g' {shlex.quote(str(template))}",
        ]
        env = base_environment()
        env.update(
            PATH=f"{Path(py312).parent}{os.pathsep}{env['PATH']}",
            SAM_CLI_TELEMETRY="0",
            AWS_DEFAULT_REGION="us-east-1",
        )
        shown = {"PATH": f"{Path(py312).parent}:$PATH", "SAM_CLI_TELEMETRY": "0"}
        command = [sam, "build"]
        run_command(
            command, cwd=source, env=env, shown_env=shown, setup=setup, timeout=INSTALL_TIMEOUT
        )
        setup.append(f"(cd {shlex.quote(str(source))} && {shlex.join(command)})")
        output = source / ".aws-sam" / "build"
        made = Built(output, load_template(output / "template.yaml"), py312, [], setup)
        assert made.functions, f"no function in {output / 'template.yaml'}"
        # Lambda's Python runtime provides boto3; give it only where the build has none.
        if not any((p / "boto3").is_dir() for p in made.paths(made.functions[0])):
            runtime = folder / "runtime-boto3"
            install = [py312, "-m", "pip", "install", "-q", "--target", str(runtime), "boto3"]
            run_command(install, cwd=folder, env=env, shown_env={}, setup=setup)
            setup.append(shlex.join(install))
            made.runtime.append(runtime)
        return {
            "output": str(output),
            "runtime": [str(p) for p in made.runtime],
            "setup": setup,
        }

    saved = made_once(tmp_path_factory, "shipped-sam", make)
    output = Path(saved["output"])
    return Built(
        output,
        load_template(output / "template.yaml"),
        py312,
        [Path(p) for p in saved["runtime"]],
        list(saved["setup"]),
    )


def run_built(
    built: Built, function: str, database_url: str, event: Any = None
) -> tuple[dict[str, Any], Ran]:
    """The function's handler imported (and called with `event`) under python3.12 -S -s,
    from the build output alone."""
    task_modules = built.task_modules(function)
    request = {
        "function": function,
        "handler": built.template["Resources"][function]["Properties"]["Handler"],
        "paths": [str(p) for p in built.paths(function)],
        "task_modules": task_modules,
        "event": event,
    }
    settings = {
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_TASK_MODULES": ",".join(task_modules),
        "TICKQ_PREPARE_THRESHOLD": "off",
        "TICKQ_LEASE_SECONDS": "180",
        "POWERTOOLS_SERVICE_NAME": "tickq",
        "POWERTOOLS_METRICS_NAMESPACE": "tickq",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        **LOCAL_AWS,
    }
    ran = run_command(
        [built.python, "-S", "-s", str(RUNNER)],
        cwd=built.output,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", **settings},
        shown_env={"PATH": "/usr/bin:/bin", **settings},
        setup=built.setup,
        stdin=json.dumps(request),
    )
    lines = ran.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1]), ran
    except (IndexError, ValueError):
        pytest.fail(f"no JSON report from {RUNNER.name}\n{ran.explain()}", pytrace=False)


def within(file: str | None, folders: list[Path]) -> bool:
    return file is not None and any(Path(file).is_relative_to(folder) for folder in folders)


def test_every_function_imports_tickq_queue_core_and_the_apps_tasks_from_the_build(
    built: Built, database_url: str
) -> None:
    wrong = []
    for function in built.functions:
        report, ran = run_built(built, function, database_url)
        folders = [built.function_dir(function), *built.layer_dirs(function)]
        handler_module = built.template["Resources"][function]["Properties"]["Handler"]
        modules = [handler_module.rsplit(".", 1)[0], "queue_core", "tickq.functions"]
        tasks = built.task_modules(function)
        if "tasks" not in tasks:
            wrong.append(f"{function}: TICKQ_TASK_MODULES is {tasks}, without the app's tasks")
        for module in [*modules, *tasks]:
            if not within(report["files"].get(module), folders):
                wrong.append(
                    f"{function}: {module} from {report['files'].get(module)}, not from "
                    f"{[str(f) for f in folders]}\n{ran.explain()}"
                )
    assert not wrong, "\n".join(wrong)


def test_the_built_api_function_serves_the_consoles_script(
    built: Built, database_url: str, app: App
) -> None:
    event = json.loads((app.shipped.events / "api-get-job.json").read_text(encoding="utf-8"))
    event.pop("pathParameters", None)
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/ui/app.js"
    event["routeKey"] = event["requestContext"]["routeKey"] = "GET /ui/{asset}"

    report, ran = run_built(built, "ApiFunction", database_url, event)

    answer = report["result"]
    assert answer["statusCode"] == 200, f"{answer}\n{ran.explain()}"
    static = Path(report["files"]["tickq.functions"]).parent / "static" / "app.js"
    assert within(str(static), built.paths("ApiFunction")), ran.explain()
    assert answer["body"] == static.read_text(encoding="utf-8"), ran.explain()


def test_the_built_tick_function_drains_a_job_of_the_apps_task(
    built: Built, database_url: str, app: App, conn: psycopg.Connection
) -> None:
    app.run(
        "enqueue",
        "hello",
        "--payload",
        '{"name": "Ada"}',
        "--tasks",
        "tasks",
        env={"TICKQ_DATABASE_URL": database_url},
    )

    report, ran = run_built(built, "TickFunction", database_url, {"source": "tickq.schedule"})

    assert report["result"]["succeeded"] == 1, ran.explain()
    row = conn.execute("select type, status, result from tickq.jobs").fetchone()
    assert row == ("hello", "succeeded", {"greeting": "hello, Ada"}), ran.explain()
