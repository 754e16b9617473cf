"""The `tickq` command line: human tables by default, `--json` for machines.

Exit codes: 0 success, 1 the operation was refused (unknown job, wrong state, lease lost),
2 bad input or configuration, 3 the database failed or could not be reached.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.markup import escape

from queue_core.errors import ConfigurationError, DatabaseError, InvalidJob, TickqError
from tickq.infra import extras, init_app
from tickq.infra.cli import console as cli_console
from tickq.infra.cli import db as cli_db
from tickq.infra.cli import deploy as cli_deploy
from tickq.infra.cli import dev, jobs, workers
from tickq.infra.cli import events as cli_events
from tickq.infra.cli import flow as cli_flow
from tickq.infra.cli import policies as cli_policies
from tickq.infra.cli import steps as cli_steps
from tickq.infra.cli.common import (
    EXIT_DATABASE,
    EXIT_INPUT,
    EXIT_REFUSED,
    EXIT_RESTART,
    UsageError,
    err,
)

EXIT_CODES = (
    "exit codes: 0 ok, 1 refused (not found, wrong state), 2 bad input, 3 database error, "
    f"{EXIT_RESTART} restart (tickq work --exit-on-abandoned: handlers abandoned at their timeout)"
)
EXAMPLES = """\
examples:
  tickq demo                                  run the demo on a throwaway PostgreSQL
  tickq migrate                               create or upgrade the tickq schema
  tickq enqueue embed --payload '{"doc": 1}' --key doc-1
  tickq work --tasks myapp.tasks              run a worker until SIGTERM
  tickq jobs --status dead --type embed       list dead embed jobs
  tickq retry --dead --type embed             send them back to the queue

The database is TICKQ_DATABASE_URL; without it, the local PostgreSQL `tickq db start`
left running, else an embedded one for the command's own run.
exit codes: 0 ok, 1 refused (not found, wrong state), 2 bad input, 3 database error
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickq",
        description="A job queue in one PostgreSQL table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Callable[[argparse.Namespace], int], help: str, examples: str = ""
    ) -> Any:
        p = sub.add_parser(
            name,
            help=help,
            description=help,
            epilog=(f"examples:\n{examples}\n\n" if examples else "") + EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # SUPPRESS: a subcommand's default must not undo `tickq --json COMMAND`.
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        p.set_defaults(func=func)
        return p

    workers.register(command)
    jobs.register(command)
    dev.register(command)
    cli_policies.register(command)
    cli_flow.register(command)
    cli_steps.register(command)
    cli_deploy.register(command)
    cli_events.register(command)
    cli_console.register(command)
    cli_db.register(command)
    init_app.register(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.json = bool(getattr(args, "json", False))
    # A command line of its own (not a call from Python): `tickq work` may start afresh in
    # place when it must be rid of handler threads.
    args.restartable = argv is None
    _configure_logging(quiet=args.command == "demo")
    # As under `python -m`, the current directory comes first on the import path, so
    # TICKQ_TASK_MODULES=myapp.tasks finds ./myapp (a console script starts in bin/).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return int(args.func(args))
    except ModuleNotFoundError as exc:
        lacking = extras.missing(f"tickq {args.command}", exc)
        if lacking is None:
            raise
        return _fail(args, lacking, EXIT_INPUT)
    except (InvalidJob, UsageError, ConfigurationError) as exc:
        return _fail(args, exc, EXIT_INPUT)
    except DatabaseError as exc:
        hint = ""
        if "does not exist" in str(exc) and "tickq" in str(exc):
            hint = " (has `tickq migrate` run on this database?)"
        return _fail(args, exc, EXIT_DATABASE, hint)
    except TickqError as exc:
        return _fail(args, exc, EXIT_REFUSED)


def _configure_logging(*, quiet: bool) -> None:
    """Worker events (retries, expired leases, reconnects) go to stderr, one line each.

    Adds one handler (once per process) and leaves propagation alone, so an application
    or test harness that calls main() keeps its own logging.
    """
    level = os.environ.get("TICKQ_LOG_LEVEL", "ERROR" if quiet else "WARNING").upper()
    logger = logging.getLogger("tickq")
    handler = next((h for h in logger.handlers if isinstance(h.formatter, _LogFormat)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LogFormat())
        logger.addHandler(handler)
    handler.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")
    if logger.level == logging.NOTSET or logger.level > handler.level:
        logger.setLevel(handler.level)


class _LogFormat(logging.Formatter):
    FIELDS = ("job_id", "job_type", "attempt", "status", "error")

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(
            f"{k}={getattr(record, k)}" for k in self.FIELDS if getattr(record, k, None)
        )
        stamp = self.formatTime(record, "%H:%M:%S")
        line = f"{stamp} {record.levelname.lower()} {record.getMessage()} {extra}".rstrip()
        # A failure's cause (a 500 under tickq serve or tickq invoke): its traceback follows.
        if record.exc_info and record.exc_info[0] is not None:
            return f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _fail(args: argparse.Namespace, exc: Exception, code: int, hint: str = "") -> int:
    if args.json:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc) + hint}))
    else:
        # Invalid UTF-8 from argv arrives as lone surrogates, which a strict stream cannot
        # encode (and a failed write leaves in rich's buffer for every later print).
        message = f"{exc}{hint}".encode("utf-8", "backslashreplace").decode("utf-8")
        # Escaped: a message's brackets (pip install 'tickq[aws]') are not markup.
        err.print(f"[red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
