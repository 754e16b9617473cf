"""The product as shipped: tickq's wheel installed into a fresh virtualenv outside the
checkout, and an application written by that install's `tickq init`.

The rest of the suite runs from the repository root, where the top-level `functions`
folder can stand in for the installed `tickq.functions` and hide what an installed copy
lacks. Here nothing of the checkout is importable: the wheel is built from a copy of the
source, installed with its `aws` and `local` extras from the package index into a new
virtualenv, and every command runs that virtualenv's `tickq` from the application's folder
(outside the repository) with no PYTHONPATH. The application also holds a `functions`
package of its own, as the README allows one to.

One virtualenv serves the whole session (under pytest-xdist, the first worker builds it
and the others wait for it); each process writes its own application. A failure names the
commands that reproduce it, from the copy of the source onwards, and what the failing
process printed.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
import yaml

# As in tests/browser: root in a container, no sandbox, nothing that phones home.
from tests.browser.conftest import CHROMIUM_FLAGS, CHROMIUM_NAMES

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = "aws,local"
# What the build never needs from the checkout: version control, virtualenvs, build output
# and what the wheel does not ship.
TOP_LEVEL_SKIPPED = frozenset(
    {
        ".git",
        ".ci",
        ".typing",
        ".venv",
        ".venv-sam",
        ".aws-sam",
        "build",
        "dist",
        "tests",
        "bench",
        "docs",
    }
)
SKIPPED_PATTERNS = (
    "__pycache__",
    "*.egg-info",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
)
SKIPPED_ANYWHERE = shutil.ignore_patterns(*SKIPPED_PATTERNS)
# Environment that must not reach the shipped commands: it would put the checkout (or the
# test virtualenv) on their import path, or configure tickq from the test run.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")
DROPPED_PREFIXES = ("TICKQ_", "PYTEST_", "POWERTOOLS_")
# No AWS call of a local run may look for real credentials (nor the instance metadata).
LOCAL_AWS = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}
# The user `tickq serve` signs in as; an operator, so the operator view is open to it.
SERVE_USER = "olivia"
# Bounds on waits for conditions, so that a hang fails instead of blocking the run; nothing
# asserts on timing.
INSTALL_TIMEOUT = 900
COMMAND_TIMEOUT = 180
SERVER_START_TIMEOUT = 90
BROWSER_TIMEOUT_MS = 30_000
TAIL = 8_000  # characters of a process's output shown with a failure


def tail(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text or ""
    return (
        text if len(text) <= TAIL else f"[...{len(text) - TAIL} characters before]\n" + text[-TAIL:]
    )


def shell_value(value: str) -> str:
    """A quoted value; one that extends $PATH keeps it expanding."""
    head, extends, _ = value.rpartition(":$PATH")
    return (
        f"{shlex.quote(head)}:$PATH" if extends and value.endswith(extends) else shlex.quote(value)
    )


def shell_line(command: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    settings = " ".join(f"{name}={shell_value(value)}" for name, value in env.items())
    return (
        f"(cd {shlex.quote(str(cwd))} && {settings + ' ' if settings else ''}{shlex.join(command)})"
    )


@dataclass
class Ran:
    """One finished command, with what reproduces it."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    reproduce: str
    # What else to say when it failed (the same command with tracebacks), computed then.
    why: Callable[[], str] | None = field(default=None, compare=False, repr=False)

    def explain(self) -> str:
        text = (
            f"{self.reproduce}\nexit status {self.returncode}\n"
            f"--- stdout ---\n{tail(self.stdout)}\n--- stderr ---\n{tail(self.stderr)}"
        )
        return text if self.why is None else f"{text}\n{self.why()}"

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            pytest.fail(f"expected JSON on stdout\n{self.explain()}", pytrace=False)


def run_command(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    shown_env: Mapping[str, str],
    setup: list[str],
    stdin: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
    check: bool = True,
) -> Ran:
    """Run `command`; on failure (or when check and it exits non-zero) fail the test with the
    setup commands, this command and its output."""
    line = shell_line(command, cwd, shown_env)
    if stdin is not None:
        line = f"printf %s {shlex.quote(stdin)} | {line}"
    reproduce = "\n".join(["to reproduce:", *(f"  {step}" for step in setup), f"  {line}"])
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=dict(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{shlex.join(command)} did not finish in {timeout:.0f} s\n{reproduce}\n"
            f"--- stdout ---\n{tail(exc.stdout)}\n--- stderr ---\n{tail(exc.stderr)}",
            pytrace=False,
        )
    ran = Ran(command, done.returncode, done.stdout, done.stderr, reproduce)
    if check and done.returncode != 0:
        pytest.fail(f"{shlex.join(command)} failed\n{ran.explain()}", pytrace=False)
    return ran


def base_environment() -> dict[str, str]:
    """This process's environment less what would reach into the checkout or set tickq up."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in DROPPED_ENV and not name.startswith(DROPPED_PREFIXES)
    }
    entries = env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    env["PATH"] = os.pathsep.join(e for e in entries if e and not _inside(Path(e), ROOT))
    return env


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Shipped:
    """The wheel and the virtualenv it was installed into."""

    root: Path
    wheel: Path
    venv: Path
    site_packages: Path
    setup: list[str] = field(default_factory=list)  # the shell commands that made it

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def tickq(self) -> Path:
        return self.bin / "tickq"

    @property
    def events(self) -> Path:
        """The sample events as installed (package data of tickq.infra)."""
        return self.site_packages / "tickq" / "infra" / "events"

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = base_environment()
        env["PATH"] = f"{self.bin}{os.pathsep}{env['PATH']}"
        env.update(extra or {})
        return env

    def run(
        self,
        command: list[str | Path],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = COMMAND_TIMEOUT,
        check: bool = True,
        setup: list[str] | None = None,
    ) -> Ran:
        """Run a command of the installed tickq (PATH starts with the virtualenv's bin)."""
        shown = {"PATH": f"{self.bin}:$PATH", **(env or {})}
        return run_command(
            [str(part) for part in command],
            cwd=cwd,
            env=self.environment(env),
            shown_env=shown,
            setup=self.setup if setup is None else setup,
            stdin=stdin,
            timeout=timeout,
            check=check,
        )


def _skip_source(directory: str, names: list[str]) -> set[str]:
    skipped = set(SKIPPED_ANYWHERE(directory, names))
    if Path(directory) == ROOT:
        skipped |= TOP_LEVEL_SKIPPED & set(names)
    return skipped


def build_and_install(where: Path) -> Shipped:
    """Copy the source, build its wheel, install it with its extras into a new virtualenv."""
    source, dist, venv = where / "source", where / "dist", where / "venv"
    excluded = [f"--exclude=./{name}" for name in sorted(TOP_LEVEL_SKIPPED)]
    excluded += [f"--exclude={pattern}" for pattern in SKIPPED_PATTERNS]
    setup = [
        f"mkdir -p {shlex.quote(str(source))}",
        f"tar -C {shlex.quote(str(ROOT))} {shlex.join(excluded)} -cf - . "
        f"| tar -C {shlex.quote(str(source))} -xf -",
    ]
    shutil.copytree(ROOT, source, ignore=_skip_source)
    env = base_environment()

    def step(command: list[str]) -> Ran:
        ran = run_command(
            command, cwd=where, env=env, shown_env={}, setup=setup, timeout=INSTALL_TIMEOUT
        )
        setup.append(shell_line(command, where, {}))
        return ran

    # Build isolation fetches the build backend pyproject.toml asks for, as a release would.
    step([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(source)])
    wheels = sorted(dist.glob("tickq-*.whl"))
    assert len(wheels) == 1, f"expected one tickq wheel in {dist}, found {wheels}"
    step([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    step([python, "-m", "pip", "install", "--quiet", f"{wheels[0]}[{EXTRAS}]"])
    probe = step([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Shipped(where, wheels[0], venv, Path(probe.stdout.strip()), setup)


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """`make(folder)` once per test session, its JSON-able record shared by every
    pytest-xdist worker: the first to come makes it, the others wait and read the record."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, common to its workers
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "made.json"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if record.is_file():
            saved: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
            return saved
        for leftover in folder.iterdir():  # of a worker that failed half way
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        made = make(folder)
        record.write_text(json.dumps(made), encoding="utf-8")
        return made


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Shipped:
    """The installed wheel: built once per session."""

    def make(folder: Path) -> dict[str, Any]:
        installed = build_and_install(folder)
        return {
            "root": str(installed.root),
            "wheel": str(installed.wheel),
            "venv": str(installed.venv),
            "site_packages": str(installed.site_packages),
            "setup": installed.setup,
        }

    saved = made_once(tmp_path_factory, "shipped", make)
    return Shipped(
        Path(saved["root"]),
        Path(saved["wheel"]),
        Path(saved["venv"]),
        Path(saved["site_packages"]),
        list(saved["setup"]),
    )


# A package of the application's own under the name the checkout's folder has: the README
# says an application's `functions/` works beside the installed tickq.functions.
OWN_FUNCTIONS_PACKAGE = '"""The application\'s own package named functions."""\n\nOWNER = "app"\n'


@dataclass(frozen=True)
class App:
    directory: Path
    shipped: Shipped
    setup: list[str]  # the shell commands that made the virtualenv and the application

    @property
    def template(self) -> Path:
        return self.directory / "template.yaml"

    def run(
        self,
        *args: str | Path,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = COMMAND_TIMEOUT,
        check: bool = True,
    ) -> Ran:
        """`tickq ARGS` from the application's folder, with the installed tickq."""
        return self.shipped.run(
            ["tickq", *args],
            cwd=self.directory,
            env=env,
            stdin=stdin,
            timeout=timeout,
            check=check,
            setup=self.setup,
        )

    def why(self, *args: str | Path, env: Mapping[str, str] | None = None) -> str:
        """`tickq ARGS` again, its log records printed with their tracebacks too (the CLI's
        own lines are one per record, without the exception): for a failure's message."""
        ran = self.shipped.run(
            ["python", "-c", WITH_TRACEBACKS, *args],
            cwd=self.directory,
            env=env,
            check=False,
            setup=[],  # made as above
        )
        return f"--- the same, logging tracebacks ---\n{ran.explain()}"

    def sample(self, name: str) -> Any:
        """A sample event as the wheel ships it (tickq/infra/events)."""
        return json.loads((self.shipped.events / f"{name}.json").read_text(encoding="utf-8"))

    def api_event(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """An HTTP API (payload 2.0) event for METHOD PATH, from the shipped GET sample."""
        event = self.sample("api-get-job")
        event.pop("pathParameters", None)
        path, _, query = path.partition("?")
        event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["rawQueryString"] = query
        if query:
            event["queryStringParameters"] = dict(parse_qsl(query))
        if body is not None:
            event["headers"]["content-type"] = "application/json"
            event["body"] = json.dumps(body)
        return event

    def why_request(self, method: str, path: str, folder: Path, database_url: str) -> str:
        """A request that failed through `tickq serve`, again through `tickq invoke
        ApiFunction` (as the sample events' caller), with tracebacks."""
        event = folder / f"why-{next(_event_numbers)}.json"
        event.write_text(json.dumps(self.api_event(method, path), indent=2), encoding="utf-8")
        settings = {"TICKQ_DATABASE_URL": database_url, **LOCAL_AWS}
        return self.why("invoke", "ApiFunction", "--event", event, env=settings)

    def invoke(self, function: str, event: Any, folder: Path, database_url: str, **env: str) -> Ran:
        """`tickq invoke FUNCTION --event FILE` from the application's folder: the event is
        a file path, or written into `folder`. Fails the test when the command fails."""
        if isinstance(event, Path):
            path = event
        else:
            path = folder / f"{function}-{next(_event_numbers)}.json"
            path.write_text(json.dumps(event, indent=2), encoding="utf-8")
        args = ["invoke", function, "--event", str(path)]
        settings = {
            "TICKQ_DATABASE_URL": database_url,
            "NO_PROXY": "127.0.0.1,localhost",
            **LOCAL_AWS,
            **env,
        }
        ran = self.run(*args, env=settings, check=False)
        ran.why = lambda: self.why(*args, env=settings)
        if ran.returncode != 0:
            pytest.fail(f"tickq {shlex.join(args)} failed\n{ran.explain()}", pytrace=False)
        return ran


_event_numbers = itertools.count()
# `tickq ARGS` as its console script runs it, plus a handler on tickq's logger that prints
# each record's traceback.
WITH_TRACEBACKS = (
    "import logging, sys; handler = logging.StreamHandler(sys.stderr); "
    "handler.setFormatter(logging.Formatter('%(levelname)s %(name)s: %(message)s')); "
    "logging.getLogger('tickq').addHandler(handler); "
    "from tickq.infra.cli.program import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.fixture(scope="session")
def app(shipped: Shipped, tmp_path_factory: pytest.TempPathFactory) -> App:
    """`tickq init app --requirement <the wheel>`, run by the installed tickq outside the
    checkout, plus the application's own `functions` package."""
    work = tmp_path_factory.mktemp("shipped-app")
    ran = shipped.run(["tickq", "init", "app", "--requirement", shipped.wheel], cwd=work)
    directory = work / "app"
    assert (directory / "template.yaml").is_file(), ran.explain()
    own = directory / "functions"
    own.mkdir()
    (own / "__init__.py").write_text(OWN_FUNCTIONS_PACKAGE, encoding="utf-8")
    setup = [
        *shipped.setup,
        f"(cd {shlex.quote(str(work))} && PATH={shipped.bin}:$PATH tickq init app "
        f"--requirement {shlex.quote(str(shipped.wheel))} && mkdir app/functions && "
        f"printf %s {shlex.quote(OWN_FUNCTIONS_PACKAGE)} > app/functions/__init__.py)",
    ]
    return App(directory, shipped, setup)


# Templates


class TemplateLoader(yaml.SafeLoader):
    """Reads CloudFormation's short tags in their long form: `!Ref X` is {"Ref": "X"}."""


def _long_form(loader: yaml.SafeLoader, tag: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {tag if tag in ("Ref", "Condition") else f"Fn::{tag}": value}


TemplateLoader.add_multi_constructor("!", _long_form)


def load_template(path: Path) -> dict[str, Any]:
    template = yaml.load(path.read_text(encoding="utf-8"), Loader=TemplateLoader)
    assert isinstance(template, dict), f"{path} is not a template"
    return template


def resources_of_type(template: Mapping[str, Any], kind: str) -> dict[str, Any]:
    resources = template.get("Resources") or {}
    return {name: r for name, r in resources.items() if r.get("Type") == kind}


def function_names(template: Mapping[str, Any]) -> set[str]:
    return set(resources_of_type(template, "AWS::Serverless::Function"))


# `tickq serve`


@dataclass
class Served:
    """`tickq serve` of the installed tickq, running from the application's folder."""

    process: subprocess.Popen[str]
    reproduce: str
    output: list[str] = field(default_factory=list)
    url: str | None = None
    started: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.output.append(line.rstrip("\n"))
            found = re.search(r"job list page: (http://\S+)/ui\b", line)
            if found and self.url is None:
                self.url = found.group(1)
                self.started.set()
        self.started.set()  # the process ended: nobody waits for a URL any longer

    def explain(self) -> str:
        status = self.process.poll()
        state = "running" if status is None else f"exited with status {status}"
        return (
            f"{self.reproduce}\n  then request {self.url or 'its URL'}<path>\n"
            f"--- tickq serve ({state}) printed ---\n" + tail("\n".join(self.output))
        )

    def request(
        self, method: str, path: str, body: Any = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request as a browser on the page would send it (JSON bodies)."""
        assert self.url is not None
        host_port = self.url.removeprefix("http://")
        host, _, port = host_port.rpartition(":")
        client = http.client.HTTPConnection(host, int(port), timeout=60)
        payload = b"" if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            client.request(method, path, body=payload or None, headers=headers)
            response = client.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            client.close()


def wait_until_answering(served: Served, deadline: float) -> None:
    """Until the server answers an HTTP request (any status), or the deadline passes."""
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            break
        with contextlib.suppress(OSError, http.client.HTTPException):
            served.request("GET", "/ui/config.json")
            return
        time.sleep(0.2)
    pytest.fail(f"tickq serve does not answer\n{served.explain()}", pytrace=False)


@pytest.fixture(scope="module")
def served(app: App, database_url: str) -> Iterator[Served]:
    """`tickq serve --user olivia --operator --port 0` against the test database, as the
    installed command runs it (ApiFunction in its process, acting as tickq_app)."""
    command = ["tickq", "serve", "--user", SERVE_USER, "--operator", "--port", "0"]
    extra = {"TICKQ_DATABASE_URL": database_url}
    reproduce = "\n".join(
        [
            "to reproduce:",
            *(f"  {line}" for line in app.setup),
            "  "
            + shell_line(command, app.directory, {"PATH": f"{app.shipped.bin}:$PATH", **extra}),
        ]
    )
    process = subprocess.Popen(
        command,
        cwd=app.directory,
        env=app.shipped.environment(extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(process, reproduce)
    reader = threading.Thread(target=served.read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        served.started.wait(SERVER_START_TIMEOUT)
        if served.url is None:
            pytest.fail(
                f"tickq serve did not say where it listens\n{served.explain()}", pytrace=False
            )
        wait_until_answering(served, deadline)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # stops it as Ctrl-C does
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        reader.join(timeout=30)


# The browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (no browser download); skips without either."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS)
        )
        try:
            yield launched
        finally:
            launched.close()
