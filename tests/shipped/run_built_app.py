"""Run one function of a `sam build` output alone: `python3.12 -S -s run_built_app.py`, with
a JSON request on stdin:

  {"function": name, "handler": "pkg.module.attr", "paths": [function dir, layer dirs...],
   "task_modules": [...], "event": {...} or null}

No site-packages and not this file's folder: the import path is the given folders (the
function's package, then its layers, then boto3 where the runtime would provide it) and
the standard library, as in Lambda. Imports the handler and the task modules, calls the
handler with the event when there is one, and prints one JSON line: the result and where
each module of interest was imported from. Log records go to stderr, with tracebacks.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import uuid
from typing import Any

REPORTED = ("queue_core", "tickq.functions", "psycopg", "pydantic", "aws_lambda_powertools")


class Context:
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    log_stream_name = "built"

    def __init__(self, function: str) -> None:
        self.function_name = function
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function}"
        self.log_group_name = f"/aws/lambda/{function}"
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main() -> None:
    request = json.loads(sys.stdin.read())
    # Log records (a handler's "request failed", say) to stderr with their tracebacks.
    printer = logging.StreamHandler(sys.stderr)
    printer.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("tickq").addHandler(printer)
    here = os.path.dirname(os.path.abspath(__file__))
    kept = [p for p in sys.path if p and os.path.abspath(p) != here]
    sys.path[:] = [*request["paths"], *kept]
    module_name, attribute = request["handler"].rsplit(".", 1)
    handler: Any = getattr(importlib.import_module(module_name), attribute)
    for name in request["task_modules"]:
        importlib.import_module(name)
    event = request.get("event")
    result = None if event is None else handler(event, Context(request["function"]))
    names = (module_name, *REPORTED, *request["task_modules"])
    files = {name: getattr(sys.modules.get(name), "__file__", None) for name in names}
    print(json.dumps({"result": result, "files": files, "sys.path": sys.path}, default=str))


if __name__ == "__main__":
    main()
