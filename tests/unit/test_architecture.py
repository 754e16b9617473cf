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
    "queue_core.tick",
    "queue_core.pipeline",
    "queue_core.worker",
    "queue_core.context",
    "queue_core.step_context",
    "queue_core.steps",
    "queue_core.ports",
    "queue_core.derived",
    "queue_core.memory_store",
)
POSTGRES = "queue_core.postgres"
# What the PostgreSQL adapter never imports: the runner that sits on its port.
RUNNER = ("queue_core.tick", "queue_core.pipeline", "queue_core.worker", "queue_core.context")


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
    assert "queue_core.ports" in graph["queue_core.tick"]
    assert "queue_core" in graph["tickq.functions.tick"]
    assert "tickq.infra.cli_common" in graph["tickq.infra.cli"]
    assert "tickq.functions.api" in graph["tickq.infra.serve"]


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
