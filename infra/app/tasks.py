"""Your job handlers. Each @task names a job type; the ticks import this module because the
template's TaskModules parameter names it (add your other modules there, comma-separated).

Try it here: `tickq enqueue hello --payload '{"name": "Ada"}' --tasks tasks`, then
`tickq invoke TickFunction --event events/tick.json`, then `tickq jobs`.
"""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, PermanentError, task


@task("hello", max_attempts=3)
def hello(job: JobContext) -> dict[str, Any]:
    """The return value is stored as the job's result; an exception retries with backoff."""
    name = job.payload.get("name", "world")
    if not isinstance(name, str):
        raise PermanentError("payload.name must be a string")  # dead at once, no retries
    return {"greeting": f"hello, {name}"}
