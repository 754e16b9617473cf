"""Run a SAM function's handler in this process, the way `sam local invoke` would, without
Docker: read template.yaml (Globals merged), set the function's environment, import its
handler and call it with a Lambda-like context whose remaining time counts down from the
function's Timeout.

Template values resolve where they can locally: literals, parameter defaults and pseudo
parameters. References to resources (a bus, another function) and parameters without a
default have no local value; those variables are left unset and reported.
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

from .lambda_context import LOCAL_ACCOUNT, LocalContext

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


def load_template(path: Path) -> Mapping[str, Any]:
    """Parse a SAM template, CloudFormation tags (!Ref, !Sub, !If ...) included."""
    try:
        from cfnlint.decode.cfn_yaml import load  # type: ignore[import-untyped]
    except ImportError:
        raise LocalInvokeError(
            "reading template.yaml needs cfn-lint's CloudFormation YAML parser: "
            "pip install 'tickq[test]' (or cfn-lint)"
        ) from None
    if not path.is_file():
        raise LocalInvokeError(f"no template at {path}")
    try:
        template: Mapping[str, Any] = load(str(path))
    except Exception as exc:  # cfn-lint raises its own parse error types
        raise LocalInvokeError(f"cannot parse {path}: {exc}") from exc
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
    )


def resolve_handler(handler: str) -> Callable[..., Any]:
    """Import `package.module.function` the way the Python runtime does."""
    module_name, _, attribute = handler.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
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
    with _environment(environment), contextlib.redirect_stdout(sys.stderr):
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
    here = Path.cwd() / "template.yaml"
    return here if here.is_file() else Path(__file__).resolve().parents[1] / "template.yaml"


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


def _fields(config: FunctionConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in FunctionConfig.__dataclass_fields__}
