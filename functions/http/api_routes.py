"""The /jobs routes of ApiFunction, on a Router so other modules can add their own routes.

Every query runs as the caller (row-level security): another user's job is simply absent.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from uuid import UUID

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.metrics import MetricUnit

from queue_core import InvalidJob, Job, JobBatch, JobSpec
from queue_core.model import dependencies
from queue_core.model.steps import MAX_SIGNAL_BYTES
from queue_core.model.transitions import compensating
from queue_core.store.port import Store
from tickq.functions.aws import RETURN_RESERVE_MS, TimeLeft, time_left_of
from tickq.functions.http import console_routes
from tickq.functions.http.errors import BadRequest
from tickq.functions.http.identity import caller_id
from tickq.functions.http.requests import MAX_BODY_BYTES, EnqueueRequest, json_body, parse
from tickq.functions.observability import logger, metrics
from tickq.functions.runtime import kick_tick, settings, store, task_catalog, tasks

router = Router()


@router.post("/jobs")
def enqueue_job() -> Response:
    owner = _caller()
    request = parse(EnqueueRequest, _json_body())
    header_key = router.current_event.headers.get("Idempotency-Key")  # case-insensitive
    if header_key is not None:
        if request.idempotency_key not in (None, header_key):
            raise BadRequest("the Idempotency-Key header and idempotency_key in the body differ")
        request = request.model_copy(update={"idempotency_key": header_key})
    scoped = store(user_id=owner)  # refuses a login that would read past the policies first
    catalog = task_catalog([request.type])
    spec = _for_outside_caller(request.spec(tasks(), user_id=owner, catalog=catalog))
    parents = dependencies.parents(request.after)
    if parents:  # row-level security makes another user's job "not found"
        result = scoped.enqueue_after(JobBatch.of([spec]), [parents])[0]
    else:
        result = scoped.enqueue(spec)
    job = result.job or scoped.get(result.id)
    logger.info("enqueued", extra={"job_id": str(job.id), "job_type": job.type})
    if not (result.duplicate or result.debounced):
        metrics.add_metric(name="enqueued", unit=MetricUnit.Count, value=1)
        kick_tick(_time_left())
    status = HTTPStatus.OK if result.duplicate or result.debounced else HTTPStatus.ACCEPTED
    body = _with_family(job)
    if spec.gate is not None:  # only gated requests pay for reading the gate back
        body.update(
            _gate(store(user_id=owner), job.id),
            debounced=result.debounced,
            duplicate=result.duplicate,
        )
    return _json(status, body, Location=f"/jobs/{job.id}")


@router.get("/jobs")
def list_jobs() -> Response:
    query = router.current_event.query_string_parameters or {}
    unknown = set(query) - console_routes.FILTERS
    if unknown:
        raise BadRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    # Large values left out ("truncated") and the page bounded in bytes (queue_core/model/pages.py):
    # GET /jobs/{id} has the whole job.
    page = store(user_id=_caller()).search_listed(
        console_routes.job_filter(query).params(),
        limit=_limit(query.get("limit")),
        cursor=query.get("cursor") or None,
    )
    return _json(HTTPStatus.OK, {"jobs": page.jobs, "next_cursor": page.next_cursor})


@router.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    """The job, its parents and children, and its durable steps (names, times, sizes),
    wait and resumes."""
    scoped = store(user_id=_caller())
    job = scoped.get(job_id)
    body = {**_with_family(job), **_gate(scoped, job.id), **scoped.steps.show(job.id).to_dict()}
    # A job waiting only for its flow key says which ("held by flow key K").
    body["held_by_flow_key"] = scoped.flow_waits_for(job.id)
    return _json(HTTPStatus.OK, body)


@router.post("/jobs/<job_id>/retry")
def retry_job(job_id: str) -> Response:
    """Completed steps are kept (the job resumes where it failed) unless the body says
    {"fresh": true} (forget them all) or {"from_step": NAME} (forget NAME and every step
    stored after it)."""
    body = _optional_json_body()
    if body is None:
        body = {}
    if (
        not isinstance(body, dict)
        or set(body) - {"fresh", "from_step"}
        or type(body.get("fresh", False)) is not bool
        or not isinstance(body.get("from_step", ""), str)
        or (body.get("fresh") and "from_step" in body)
    ):
        raise BadRequest(
            'the retry body may only be {"fresh": true|false} or {"from_step": "<step name>"}'
        )
    fresh = body.get("fresh", False)
    from_step = body.get("from_step")
    return _job(store(user_id=_caller()).steps.retry(job_id, fresh=fresh, from_step=from_step))


@router.post("/jobs/<job_id>/signals/<name>")
def signal_job(job_id: str, name: str) -> Response:
    """Send the signal `name` to one of the caller's jobs; the body, if any, is its JSON
    payload. 202: kept (and, when the job waits for it, the job woken)."""
    payload = _optional_json_body(MAX_SIGNAL_BYTES + 1024)
    scoped = store(user_id=_caller())
    woke = scoped.steps.signal(job_id, name, payload)
    if woke:
        kick_tick(_time_left())
    body = {"id": job_id, "signal": name, "woke": woke}
    return _json(HTTPStatus.ACCEPTED, body)


@router.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response:
    job = store(user_id=_caller()).cancel(job_id)
    return _json(HTTPStatus.OK, {**job.to_dict(), "compensating": compensating(job)})


def _for_outside_caller(spec: JobSpec) -> JobSpec:
    """What an end user may not choose: a queue the deployment does not run (each name is a
    metric series and an alarm for operators), or a start in the past (which would jump
    the queue and push the oldest-runnable-age alarm to decades); that becomes now."""
    queues = settings().queues
    if spec.queue not in queues:
        accepted = ", ".join(queues)
        raise InvalidJob("queue", f"must be one of the queues this API accepts: {accepted}")
    if spec.run_after is not None and spec.run_after < datetime.now(UTC):
        spec = replace(spec, run_after=None)
    return spec


def _caller() -> UUID:
    return caller_id(router.current_event.raw_event.get("requestContext"))


def _time_left() -> TimeLeft:
    """What an AWS call may spend of this request's invocation."""
    return time_left_of(router.lambda_context, RETURN_RESERVE_MS)


def _optional_json_body(max_bytes: int = MAX_BODY_BYTES) -> Any:
    """A JSON body, or None when the request has none."""
    return json_body(router.current_event, required=False, max_bytes=max_bytes)


def _json_body(max_bytes: int = MAX_BODY_BYTES) -> Any:
    return json_body(router.current_event, max_bytes=max_bytes)


def _limit(value: str | None) -> int:
    if value is None:
        return 50
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"limit must be an integer, got {value[:40]!r}") from None


def _with_family(job: Job) -> dict[str, Any]:
    """The job with its parents ("after") and children, each with its type and status."""
    relatives = store(user_id=_caller()).relatives(job.id)
    return {**job.to_dict(), **dependencies.family(relatives)}


def _gate(scoped: Store, job_id: UUID) -> dict[str, Any]:
    """The debounce or throttle that made the job ("debounced 3 times"), under "gate"."""
    view = scoped.gate_of(job_id)
    return {"gate": None if view is None else view.to_dict()}


def _job(job: Job) -> Response:
    return _json(HTTPStatus.OK, job.to_dict())


def _json(status: int, body: Any, **headers: str) -> Response:
    return Response(
        status_code=int(status),
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, default=str),
        headers=headers or None,
    )
