"""Every benchmark module imports: a script run only by hand otherwise breaks unnoticed when a
helper it borrowed moves (bench.app_admit_cost once imported a function another script no
longer had)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(info.name for info in pkgutil.walk_packages(bench.__path__, prefix="bench."))


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports(name: str) -> None:
    importlib.import_module(name)
