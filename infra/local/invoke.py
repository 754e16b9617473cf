"""Run a SAM function's handler in this process, the way `sam local invoke` would, without
Docker: read template.yaml (Globals merged), set the function's environment, import its
handler and call it with a Lambda-like context whose remaining time counts down from the
function's Timeout.

Template values resolve where they can locally: literals, parameter defaults and pseudo
parameters. References to resources (a bus, another function) and parameters without a
default have no local value; those variables are left unset and reported.

As in Lambda, the function's code (its CodeUri, relative to the template) comes first on
the import path, so the user's task modules import without PYTHONPATH; the Handler
strings of tickq's own functions name the installed `tickq.functions`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickq.infra import extras
from tickq.infra.local.lambda_context import LOCAL_ACCOUNT, LocalContext

DEFAULT_TIMEOUT = 3  # seconds, as in SAM when neither the function nor Globals set one
DEFAULT_MEMORY = 128
_SUB_VARIABLE = re.compile(r"\$\{([^}!]+)\}")


class LocalInvokeError(Exception):
    """The function cannot be run locally as asked."""


@dataclass(frozen=True, slots=True)
class FunctionConfig:
    """What a local invocation needs of one AWS::Serverless::Function."""

    logical_id: str
    handler: str
    timeout: int
    memory: int
    environment: dict[str, str]
    unresolved: list[str] = field(default_factory=list)
    code_uri: str | None = None  # the function's code folder, relative to the template


def load_template(path: Path) -> Mapping[str, Any]:
    """Parse a SAM template, CloudFormation tags (!Ref, !Sub, !If ...) included."""
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError as exc:
        raise extras.missing("tickq invoke", exc) or exc from None
    if not path.is_file():
        raise LocalInvokeError(
            f"no template at {path}: run from the directory of your template.yaml "
            "(`tickq init DIR` writes one), or pass --template"
        )

    class Loader(yaml.SafeLoader):
        """Reads each short tag as its long form: `!Ref X` is {"Ref": "X"}."""

    def long_form(loader: Any, tag: str, node: Any) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if tag == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        return {tag if tag in ("Ref", "Condition") else f"Fn::{tag}": value}

    Loader.add_multi_constructor("!", long_form)
    try:
        template = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)
    except (OSError, UnicodeError, yaml.YAMLError) as exc:
        raise LocalInvokeError(f"cannot parse {path}: {exc}") from exc
    if not isinstance(template, Mapping):
        raise LocalInvokeError(f"cannot parse {path}: not a template (a YAML mapping)")
    return template


def function_config(template: Mapping[str, Any], logical_id: str) -> FunctionConfig:
    """The function's settings with Globals.Function merged under its own."""
    resources = template.get("Resources") or {}
    functions = sorted(
        name
        for name, res in resources.items()
        if isinstance(res, Mapping) and res.get("Type") == "AWS::Serverless::Function"
    )
    if logical_id not in functions:
        raise LocalInvokeError(
            f"no function {logical_id!r} in the template (functions: {', '.join(functions)})"
        )
    defaults = (template.get("Globals") or {}).get("Function") or {}
    own = resources[logical_id].get("Properties") or {}
    variables = {
        **((defaults.get("Environment") or {}).get("Variables") or {}),
        **((own.get("Environment") or {}).get("Variables") or {}),
    }
    resolver = _Resolver(template)
    environment: dict[str, str] = {}
    unresolved: list[str] = []
    for name, value in variables.items():
        resolved = resolver.resolve(value)
        if resolved is None:
            unresolved.append(name)
        else:
            environment[name] = resolved
    handler = own.get("Handler") or defaults.get("Handler")
    if not isinstance(handler, str) or "." not in handler:
        raise LocalInvokeError(f"{logical_id} has no Handler of the form module.function")
    return FunctionConfig(
        logical_id=logical_id,
        handler=handler,
        timeout=int(own.get("Timeout") or defaults.get("Timeout") or DEFAULT_TIMEOUT),
        memory=int(own.get("MemorySize") or defaults.get("MemorySize") or DEFAULT_MEMORY),
        environment=environment,
        unresolved=unresolved,
        code_uri=_local_path(own.get("CodeUri") or defaults.get("CodeUri")),
    )


def _local_path(code_uri: Any) -> str | None:
    """A CodeUri that names a local folder (not an S3 location)."""
    if isinstance(code_uri, str) and not code_uri.startswith("s3://"):
        return code_uri
    return None


def resolve_handler(handler: str) -> Callable[..., Any]:
    """Import `package.module.function` the way the Python runtime does."""
    module_name, _, attribute = handler.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        lacking = extras.missing("tickq invoke", exc)
        if lacking is not None:
            raise lacking from None
        raise LocalInvokeError(f"cannot import handler module {module_name!r}: {exc}") from exc
    function = getattr(module, attribute, None)
    if not callable(function):
        raise LocalInvokeError(f"{module_name} has no callable {attribute!r}")
    return function


@dataclass(frozen=True, slots=True)
class Invocation:
    result: Any
    seconds: float
    timed_out: bool
    config: FunctionConfig


def invoke(
    logical_id: str,
    event: Any,
    *,
    template_path: Path,
    env: Mapping[str, str] | None = None,
) -> Invocation:
    """Call the function's handler with `event`; handler output goes to stderr, like logs."""
    config = function_config(load_template(template_path), logical_id)
    environment = {
        "AWS_REGION": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": logical_id,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(config.memory),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_SAM_LOCAL": "true",
        **config.environment,
        **(env or {}),
    }
    config = FunctionConfig(**{**_fields(config), "environment": environment})
    code = None if config.code_uri is None else template_path.parent / config.code_uri
    with (
        _environment(environment),
        _import_path(code),
        contextlib.redirect_stdout(sys.stderr),
    ):
        handler = resolve_handler(config.handler)
        region = config.environment.get("AWS_REGION", "us-east-1")
        context = LocalContext(
            config.logical_id,
            timeout_seconds=config.timeout,
            memory_limit_in_mb=config.memory,
            region=region,
        )
        started = time.monotonic()
        result = handler(event, context)
        seconds = time.monotonic() - started
    return Invocation(result, seconds, seconds > config.timeout, config)


def default_template() -> Path:
    """./template.yaml, else (in this repository's checkout) the reference template."""
    here = Path.cwd() / "template.yaml"
    reference = Path(__file__).resolve().parents[2] / "template.yaml"
    return reference if not here.is_file() and reference.is_file() else here


class _Resolver:
    """Resolves the intrinsic values that have a local meaning."""

    def __init__(self, template: Mapping[str, Any]) -> None:
        self.parameters = template.get("Parameters") or {}
        self.pseudo = {
            "AWS::Region": os.environ.get("AWS_REGION") or "us-east-1",
            "AWS::AccountId": LOCAL_ACCOUNT,
            "AWS::StackName": "tickq-local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }

    def resolve(self, value: Any) -> str | None:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, Mapping) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Ref" and isinstance(argument, str):
                return self._name(argument)
            if function == "Fn::Sub":
                return self._sub(argument)
        return None

    def _name(self, name: str) -> str | None:
        if name in self.pseudo:
            return self.pseudo[name]
        parameter = self.parameters.get(name)
        if isinstance(parameter, Mapping) and "Default" in parameter:
            return self.resolve(parameter["Default"])
        return None

    def _sub(self, argument: Any) -> str | None:
        text: str | None = None
        variables: Any = {}
        if isinstance(argument, str):
            text = argument
        elif isinstance(argument, list) and len(argument) == 2 and isinstance(argument[0], str):
            text, variables = argument[0], argument[1] or {}
        if text is None or not isinstance(variables, Mapping):
            return None
        missing = False

        def replace(match: re.Match[str]) -> str:
            nonlocal missing
            name = match.group(1)
            found = self.resolve(variables[name]) if name in variables else self._name(name)
            if found is None:
                missing = True
                return ""
            return found

        result = _SUB_VARIABLE.sub(replace, text)
        return None if missing else result


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _import_path(code: Path | None) -> Iterator[None]:
    """The function's code folder first on sys.path while it runs, as /var/task in Lambda."""
    entry = None if code is None else str(code.resolve())
    if entry is None or entry in sys.path:
        yield
        return
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _fields(config: FunctionConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in FunctionConfig.__dataclass_fields__}
