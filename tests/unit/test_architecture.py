"""The layers import in one direction: queue_core <- functions <- infra, with no cycles.

Read from the source with `ast`, so every import counts, including those inside a
function body: a late import hides a cycle from Python, not from this test. Modules are
named as installed: the functions/ and infra/ folders are `tickq.functions`, `tickq.infra`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folder -> the package it installs as.
PACKAGES = {"queue_core": "queue_core", "functions": "tickq.functions", "infra": "tickq.infra"}
# What each package must never import (the layer above it).
FORBIDDEN = {
    "queue_core": ("tickq.functions", "tickq.infra"),
    "tickq.functions": ("tickq.infra",),
    "tickq.infra": (),
}
# The runner, the handler context, the steps and the in-memory store know the store port
# alone: nothing they import, however indirectly, is PostgreSQL.
PORT_ONLY = (
    "queue_core.runner.runner",
    "queue_core.runner.pipeline",
    "queue_core.runner.worker_rule",
    "queue_core.runner.context",
    "queue_core.runner.durable_context",
    "queue_core.model.steps",
    "queue_core.store.port",
    "queue_core.store.derived",
    "queue_core.store.memory",
)
# The engine's packages by concern, and what each may import besides itself: values and
# pure rules at the bottom, the store port on them, then the runner on the port, and the
# PostgreSQL adapter, the standing policies and the console's reads beside it. The modules
# directly in queue_core/ (errors, config, telemetry, bounds, migrate, the public names)
# are not packages; errors, config and telemetry may be imported by any.
ENGINE = "queue_core"
SHARED = ("queue_core.errors", "queue_core.config", "queue_core.telemetry")
ENGINE_LAYERS = {
    "queue_core.model": (),
    "queue_core.store": ("queue_core.model",),
    "queue_core.runner": ("queue_core.model", "queue_core.store"),
    "queue_core.postgres": ("queue_core.model", "queue_core.store"),
    "queue_core.policies": ("queue_core.model", "queue_core.postgres"),
    "queue_core.console": ("queue_core.model", "queue_core.store", "queue_core.postgres"),
}
MOST_MODULES_DIRECTLY_IN_THE_ENGINE = 12
POSTGRES = "queue_core.postgres"
# What the PostgreSQL adapter never imports: the runner that sits on its port.
RUNNER = (
    "queue_core.runner.runner",
    "queue_core.runner.pipeline",
    "queue_core.runner.worker_rule",
    "queue_core.runner.context",
)


def module_name(path: Path) -> str:
    folder, *parts = path.relative_to(ROOT).with_suffix("").parts
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGES[folder], *parts])


def layer(module: str) -> str:
    """The package of PACKAGES a module belongs to."""
    return next(p for p in PACKAGES.values() if module == p or module.startswith(p + "."))


def source_modules() -> dict[str, Path]:
    return {
        module_name(path): path for folder in PACKAGES for path in (ROOT / folder).rglob("*.py")
    }


def imported_names(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Each module `module` imports, absolute, with its line: `from .a import b` names `a.b`
    when that is a module of ours, else `a`."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield (submodule if submodule in known else target), node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Our modules -> the modules of ours each imports (with the line of the import)."""
    modules = source_modules()
    known = set(modules)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for target, line in imported_names(module, path, known):
            if target in known and target != module:
                edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_every_package_and_its_imports() -> None:
    graph = import_graph()

    assert {layer(m) for m in graph} == set(PACKAGES.values())
    assert "queue_core.store.port" in graph["queue_core.runner.runner"]
    assert "queue_core" in graph["tickq.functions.tick"]
    assert "tickq.infra.cli.common" in graph["tickq.infra.cli.program"]
    assert "tickq.functions.api" in graph["tickq.infra.local.serve"]


def test_no_package_imports_a_layer_above_it() -> None:
    graph = import_graph()

    wrong = [
        f"{module} imports {target} (line {line})"
        for module, edges in graph.items()
        for target, line in edges.items()
        if layer(target) in FORBIDDEN[layer(module)]
    ]

    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_module_import_cycle() -> None:
    graph = import_graph()

    found = cycles(graph)

    assert not found, "module import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_engine_needs_no_terminal_ui_or_aws_library() -> None:
    modules = source_modules()
    outside = ("rich", "boto3", "botocore", "aws_lambda_powertools", "pydantic")

    wrong = [
        f"{module} imports {name} (line {line})"
        for module, path in modules.items()
        if layer(module) == "queue_core"
        for name, line in imported_names(module, path, set(modules))
        if name.split(".")[0] in outside
    ]

    assert not wrong, "\n".join(wrong)


def reachable(graph: dict[str, dict[str, int]], start: str) -> dict[str, list[str]]:
    """Every module `start` imports, however indirectly, with one import path to it."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        module = todo.pop()
        for target in graph.get(module, {}):
            if target not in paths:
                paths[target] = [*paths[module], target]
                todo.append(target)
    return paths


def test_the_runner_context_and_steps_depend_on_the_port_not_on_postgresql() -> None:
    graph = import_graph()
    modules = source_modules()

    wrong = []
    for start in PORT_ONLY:
        for module, path in reachable(graph, start).items():
            if module == POSTGRES or module.startswith(POSTGRES + "."):
                wrong.append(" -> ".join(path))
            for name, line in imported_names(module, modules[module], set(modules)):
                if name.split(".")[0] == "psycopg":
                    wrong.append(f"{' -> '.join(path)} imports {name} (line {line})")

    assert not wrong, "PostgreSQL reached from the port's side:\n" + "\n".join(wrong)


def test_the_postgresql_adapter_never_imports_the_runner() -> None:
    graph = import_graph()

    wrong = [
        f"{module} imports {target} (line {line})"
        for module, edges in graph.items()
        if module == POSTGRES or module.startswith(POSTGRES + ".")
        for target, line in edges.items()
        if target in RUNNER
    ]

    assert graph[f"{POSTGRES}.store"], "the adapter's imports are seen"
    assert not wrong, "\n".join(wrong)


def test_the_reachability_walk_follows_indirect_imports() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {}, "d": {"a": 1}}

    assert reachable(graph, "a") == {"a": ["a"], "b": ["a", "b"], "c": ["a", "b", "c"]}


def test_the_cycle_finder_reports_a_late_import_cycle() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 9}, "d": {"a": 1}}

    assert cycles(graph) == [["a", "b", "c"]]


def engine_package(module: str) -> str | None:
    """The package of ENGINE_LAYERS a module is in, else None."""
    return next((p for p in ENGINE_LAYERS if module == p or module.startswith(p + ".")), None)


def layering_problems(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import of an engine package against ENGINE_LAYERS."""
    return [
        f"{module} imports {target} (line {line})"
        for module, edges in graph.items()
        if (package := engine_package(module))
        for target, line in edges.items()
        if layer(target) == ENGINE
        and engine_package(target) != package
        and engine_package(target) not in ENGINE_LAYERS[package]
        and not target.startswith(SHARED)
    ]


def test_each_engine_package_imports_only_the_packages_below_it() -> None:
    graph = import_graph()

    wrong = layering_problems(graph)

    assert {engine_package(m) for m in graph} >= set(ENGINE_LAYERS), "every package is seen"
    assert not wrong, "imports against the engine's layering:\n" + "\n".join(wrong)


def test_the_layering_check_reports_a_value_module_importing_the_runner() -> None:
    graph = {
        "queue_core.model.jobs": {"queue_core.runner.runner": 3, "queue_core.errors": 1},
        "queue_core.runner.runner": {"queue_core.model.jobs": 5, "queue_core.store.port": 6},
        "queue_core.postgres.claim": {"queue_core.policies.pauses": 7},
    }

    assert layering_problems(graph) == [
        "queue_core.model.jobs imports queue_core.runner.runner (line 3)",
        "queue_core.postgres.claim imports queue_core.policies.pauses (line 7)",
    ]


def test_the_engine_keeps_few_modules_outside_its_packages() -> None:
    direct = sorted(p.name for p in (ROOT / "queue_core").glob("*.py"))

    assert len(direct) <= MOST_MODULES_DIRECTLY_IN_THE_ENGINE, direct
