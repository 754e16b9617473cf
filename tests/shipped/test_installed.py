"""The installed wheel: its code comes from the fresh virtualenv's site-packages, never from
the checkout, and its `tickq init` writes an application that names the wheel."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from .conftest import ROOT, App, Shipped

pytestmark = pytest.mark.slow

PROBE = """
import importlib.resources, importlib.util, json, sys
import queue_core, tickq.functions, tickq.infra
static = importlib.resources.files("tickq.functions") / "static"
own = importlib.util.find_spec("functions")
print(json.dumps({
    "queue_core": queue_core.__file__,
    "tickq.functions": tickq.functions.__file__,
    "tickq.infra": tickq.infra.__file__,
    "tickq": list(tickq.__path__),
    "static": sorted(p.name for p in static.iterdir()),
    "functions": None if own is None else own.origin,
    "sys.path": sys.path,
    "prefix": sys.prefix,
}))
"""


def inside(path: str | None, folder: Path) -> bool:
    return path is not None and Path(path).resolve().is_relative_to(folder.resolve())


def test_the_venv_is_fresh_and_outside_the_checkout(shipped: Shipped) -> None:
    config = (shipped.venv / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in config, config
    assert not inside(str(shipped.venv), ROOT)
    assert inside(str(shipped.site_packages), shipped.venv)


def test_tickq_imports_from_the_venvs_site_packages(shipped: Shipped) -> None:
    ran = shipped.run(["python", "-c", PROBE], cwd=shipped.root)
    found = ran.json()
    site = shipped.site_packages
    for name in ("queue_core", "tickq.functions", "tickq.infra"):
        assert inside(found[name], site), f"{name} from {found[name]}\n{ran.explain()}"
    assert found["tickq"] and all(inside(p, site) for p in found["tickq"]), ran.explain()
    assert not any(inside(p, ROOT) for p in found["sys.path"] if p), ran.explain()
    # The console's page and assets are package data of tickq.functions.
    assert {"index.html", "app.js", "style.css"} <= set(found["static"]), ran.explain()
    # And the wheel adds no top-level `functions` package of its own.
    assert found["functions"] is None, ran.explain()


def test_in_the_app_folder_its_own_functions_package_sits_beside_tickqs(app: App) -> None:
    ran = app.shipped.run(["python", "-c", PROBE], cwd=app.directory, setup=app.setup)
    found = ran.json()
    assert inside(found["tickq.functions"], app.shipped.site_packages), ran.explain()
    assert found["functions"] == str(app.directory / "functions" / "__init__.py"), ran.explain()


def test_init_wrote_an_application_that_installs_the_wheel(app: App) -> None:
    for name in ("template.yaml", "tasks.py", "README.md", "requirements.txt", "events/tick.json"):
        assert (app.directory / name).is_file(), f"tickq init wrote no {name}"
    requirements = (app.directory / "requirements.txt").read_text(encoding="utf-8")
    wheel = app.shipped.wheel
    lines = [
        line.strip()
        for line in requirements.splitlines()
        if wheel.name in line and not line.lstrip().startswith("#")
    ]
    assert len(lines) == 1 and "[aws]" in lines[0], requirements
    # A direct reference (`tickq[aws] @ file:///...`) or a path (`./vendor/tickq-....whl[aws]`)
    line = lines[0]
    if " @ " in line:
        named = Path(unquote(urlsplit(line.split(" @ ", 1)[1].strip()).path))
    else:
        named = app.directory / line.split("[", 1)[0]
    assert named.is_file(), f"requirements.txt names {line}: no such file"
    assert named.read_bytes() == wheel.read_bytes(), f"{named} is not the built {wheel}"
