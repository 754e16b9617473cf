"""Run inside the built artifact alone: `python3.12 -S -s run_built.py FUNCTION [PATH...]`.

No site-packages: the import path is the function's package and the given folders (the
layer, and boto3, which the Lambda runtime provides), as in Lambda. Imports every handler
of the built template (given as JSON on stdin), then posts a job through ApiFunction when
it is one of them and runs TickFunction once, against TICKQ_DATABASE_URL; prints one JSON
line with what happened and where each library and task module was imported from.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import uuid
from typing import Any


class Context:
    function_name = "built"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:built"
    log_group_name = "/aws/lambda/built"
    log_stream_name = "built"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main() -> None:
    function_dir, *others = sys.argv[1:]
    sys.path[:0] = [function_dir, *others]
    handlers = json.loads(sys.stdin.read())
    loaded = {}
    for name, dotted in handlers.items():
        module, attribute = dotted.rsplit(".", 1)
        imported = importlib.import_module(module)
        loaded[name] = getattr(imported, attribute)
        assert imported.__file__ is not None and imported.__file__.startswith(function_dir)
    posted = loaded["ApiFunction"](post_event(), Context()) if "ApiFunction" in loaded else None
    ticked = loaded["TickFunction"]({"source": "tickq.schedule"}, Context())
    task_modules = [m for m in os.environ.get("TICKQ_TASK_MODULES", "").split(",") if m]
    libraries = ("psycopg", "pydantic", "aws_lambda_powertools", "boto3", "botocore")
    modules = {
        name: getattr(sys.modules.get(name), "__file__", None)  # None: not imported
        for name in (*libraries, *task_modules)
    }
    print(json.dumps({"posted": posted, "ticked": ticked, "modules": modules}, default=str))


def post_event() -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "POST /jobs",
        "rawPath": "/jobs",
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": "POST", "path": "/jobs", "sourceIp": "127.0.0.1"},
            "authorizer": {"jwt": {"claims": {"sub": str(uuid.uuid4())}}},
            "requestId": "built",
            "routeKey": "POST /jobs",
            "stage": "$default",
        },
        "body": json.dumps({"type": "echo", "payload": {"built": True}}),
        "isBase64Encoded": False,
    }


if __name__ == "__main__":
    main()
