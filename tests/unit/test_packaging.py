"""An installed tickq is `queue_core` plus the `tickq` namespace: pyproject.toml maps the
functions/ and infra/ folders to `tickq.functions` and `tickq.infra` and lists the
packages one by one (setuptools finds none under a renamed folder), and every import and
Handler string uses the installed names."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.unit.test_architecture import PACKAGES, ROOT


def test_every_package_folder_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    listed = set(setuptools["packages"])
    folders = {
        ".".join([PACKAGES[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
        for folder in PACKAGES
        for init in (ROOT / folder).rglob("__init__.py")
    }

    assert folders - listed == set(), "add these to [tool.setuptools] packages"
    assert listed <= folders
    assert setuptools["package-dir"] == {
        name: folder for folder, name in PACKAGES.items() if name != folder
    }


def test_the_console_script_extras_and_type_checking_use_the_installed_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    assert project["scripts"] == {"tickq": "tickq.infra.cli:main"}
    assert (ROOT / "infra" / "cli" / "program.py").is_file()
    assert set(project["optional-dependencies"]) >= {"aws", "local", "otel", "test"}
    assert (ROOT / ".typing" / "tickq" / "functions").resolve() == ROOT / "functions"


def test_nothing_imports_the_folders_by_their_repository_names() -> None:
    # Run from the repository, `import functions` would work (pytest puts the root on the
    # import path) and load a second copy of each module; installed, it fails.
    sources = [
        path for folder in (*PACKAGES, "tests", "bench") for path in (ROOT / folder).rglob("*.py")
    ]
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in [*sources, ROOT / "dev.py"]
        for name, line in absolute_imports(path)
        if name.split(".")[0] in ("functions", "infra")
    ]

    assert not wrong, "use tickq.functions / tickq.infra:\n" + "\n".join(wrong)


def test_every_handler_string_names_the_installed_package() -> None:
    for template in (ROOT / "template.yaml", ROOT / "infra" / "app" / "template.yaml"):
        handlers = re.findall(r"^\s+Handler: (\S+)", template.read_text(), re.MULTILINE)
        assert handlers and all(h.startswith("tickq.functions.") for h in handlers), template


def absolute_imports(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module, node.lineno))
    return found
