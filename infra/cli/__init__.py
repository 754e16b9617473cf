"""The `tickq` command line: one module per command group, `program` wiring them together
(its parser and `main`, the console script)."""

from tickq.infra.cli.program import main

__all__ = ["main"]
