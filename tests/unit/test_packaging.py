"""pyproject.toml lists the packages one by one (the functions/ and infra/ folders install
under other names, which setuptools cannot find): every folder of ours that is a package
must be listed, under its installed name, or the wheel would ship without it."""

from __future__ import annotations

import tomllib

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
    assert (ROOT / "infra" / "cli.py").is_file()
    assert set(project["optional-dependencies"]) >= {"aws", "local", "otel", "test"}
    assert (ROOT / ".typing" / "tickq" / "functions").resolve() == ROOT / "functions"
