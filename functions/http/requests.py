"""Enqueue requests as they arrive from outside, checked for shape before queue_core checks
their values: unknown fields, wrong JSON types and naive times are refused here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from http import HTTPStatus
from typing import Any, TypeVar
from uuid import UUID

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt, ValidationError

from queue_core import JobSpec, Registry
from queue_core.model.dependencies import MAX_PARENTS
from queue_core.model.json_text import MAX_PAYLOAD_BYTES
from tickq.functions.http.errors import BadRequest

Model = TypeVar("Model", bound=BaseModel)
# Room for the request's other fields around a payload of the maximum size.
MAX_BODY_BYTES = MAX_PAYLOAD_BYTES + 4096
MAX_ERRORS_SHOWN = 5


class EnqueueRequest(BaseModel):
    """One job, as the HTTP API accepts it; the owner always comes from the caller."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    payload: dict[str, Any] | None = None
    queue: str | None = None
    idempotency_key: str | None = None
    priority: StrictInt | None = None
    max_attempts: StrictInt | None = None
    delay: float | None = None
    run_after: AwareDatetime | None = None
    lease_seconds: StrictInt | None = None
    # Seconds the handler may run before the runner stops it and fails the attempt.
    timeout: StrictInt | None = None
    backoff: dict[str, float] | None = None
    # Jobs of the caller's own that must succeed first (another user's job is "not found").
    after: list[UUID] | None = Field(default=None, max_length=MAX_PARENTS)
    # A fairness group within the caller's own share: stored as "<caller>/<group>", so no
    # caller can join, or use up the per-group caps of, another caller's group.
    group: str | None = None
    # {"key", "seconds", "max_seconds"} and {"key", "seconds"}: keys are the caller's own.
    debounce: dict[str, Any] | None = None
    throttle: dict[str, Any] | None = None
    # What the job touches, for the flow limits: stored as "<caller>/<key>", so no caller
    # can hold back another's work by naming its key (checked by the enqueue).
    flow_keys: list[Any] | None = None

    def spec(
        self,
        registry: Registry,
        *,
        user_id: UUID | None = None,
        catalog: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> JobSpec:
        """The request as a spec; `catalog`: the task catalogue's defaults by type, for
        types this deployment has no module of."""
        run_after: datetime | None = self.run_after
        return registry.spec(
            self.type,
            self.payload,
            catalog=catalog,
            queue=self.queue,
            user_id=user_id,
            idempotency_key=self.idempotency_key,
            priority=self.priority,
            max_attempts=self.max_attempts,
            delay=self.delay,
            run_after=run_after,
            lease_seconds=self.lease_seconds,
            timeout=self.timeout,
            backoff_policy=self.backoff,
            group=self._group(user_id),
            debounce=self.debounce,
            throttle=self.throttle,
            flow_keys=self.flow_keys,
        )

    def _group(self, user_id: UUID | None) -> str | None:
        if self.group is None or user_id is None:
            return self.group
        return f"{user_id}/{self.group}"


class TrustedEnqueueRequest(EnqueueRequest):
    """One job from another function of the same account, which may name its owner and
    any fairness group (default: the owner)."""

    user_id: UUID | None = None
    # In a batch, a parent may also be the position of an earlier job of the same event.
    after: list[UUID | StrictInt] | None = Field(default=None, max_length=MAX_PARENTS)  # type: ignore[assignment]

    def spec(
        self,
        registry: Registry,
        *,
        user_id: UUID | None = None,
        catalog: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> JobSpec:
        return super().spec(registry, user_id=user_id or self.user_id, catalog=catalog)

    def _group(self, user_id: UUID | None) -> str | None:
        return self.group


def json_body(
    event: BaseProxyEvent, *, required: bool = True, max_bytes: int = MAX_BODY_BYTES
) -> Any:
    """An HTTP request's JSON body (None when it is empty and not `required`)."""
    try:
        raw = event.decoded_body
    except (ValueError, UnicodeDecodeError):  # isBase64Encoded with a body that is not
        raise BadRequest("the body is not valid base64-encoded UTF-8") from None
    if not raw:
        if not required:
            return None
        raise BadRequest("the request needs a JSON body")
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise BadRequest(
            f"the body is {size} bytes, over the limit of {max_bytes}",
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        )
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the body is nested too deeply") from None
    except ValueError as exc:  # an integer over Python's digit limit
        raise BadRequest(f"the body holds a number too large: {str(exc)[:80]}") from None


def parse(model: type[Model], data: Any, where: str = "body") -> Model:
    """Validate `data` against `model`; a BadRequest lists what is wrong, field by field."""
    if not isinstance(data, Mapping):
        raise BadRequest(f"{where} must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(f"invalid {where}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_input=False)[:MAX_ERRORS_SHOWN]:
        location = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{location}: {error['msg']}")
    more = exc.error_count() - MAX_ERRORS_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
