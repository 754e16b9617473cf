"""The task registry: handler lookup, per-type defaults and duplicate detection."""

from __future__ import annotations

from typing import Any

import pytest

from queue_core.config import comma_list
from queue_core.errors import ConfigurationError, InvalidJob, UnknownJobType
from queue_core.model.backoff import Backoff
from queue_core.runner.registry import Registry


def embed(job: Any) -> dict[str, int]:
    return {"vectors": 1}


async def transcribe(job: Any) -> None:
    return None


def test_a_decorated_function_is_registered_under_its_type_and_returned_unchanged() -> None:
    reg = Registry()

    decorated = reg.task("embed")(embed)

    assert decorated is embed
    task = reg.get("embed")
    assert task is not None and task.fn is embed and task.is_async is False
    assert reg.names() == ["embed"]


def test_an_async_handler_is_recognised_as_async() -> None:
    reg = Registry()
    reg.task("transcribe")(transcribe)

    task = reg.get("transcribe")

    assert task is not None and task.is_async is True


def test_enqueue_requests_take_the_task_defaults() -> None:
    reg = Registry()
    reg.task(
        "embed",
        queue="gpu",
        max_attempts=7,
        lease_seconds=90,
        priority=3,
        backoff={"base": 2, "max": 30},
    )(embed)

    spec = reg.spec("embed", {"doc": 1})

    assert (spec.queue, spec.max_attempts, spec.lease_seconds, spec.priority) == ("gpu", 7, 90, 3)
    assert spec.backoff == Backoff(base=2, max=30)


def test_explicit_request_options_override_the_task_defaults() -> None:
    reg = Registry()
    reg.task("embed", queue="gpu", max_attempts=7, priority=3)(embed)

    spec = reg.spec("embed", queue="cpu", max_attempts=1, priority=-1)

    assert (spec.queue, spec.max_attempts, spec.priority) == ("cpu", 1, -1)


def test_a_type_without_a_handler_is_refused_once_handlers_are_registered() -> None:
    reg = Registry()
    reg.task("embed")(embed)

    with pytest.raises(UnknownJobType) as raised:
        reg.spec("transcribe")

    assert raised.value.known == ["embed"]


def test_an_enqueue_only_registry_accepts_any_well_formed_type() -> None:
    spec = Registry().spec("anything-goes", {"a": 1})

    assert spec.type == "anything-goes"


def test_a_second_handler_for_one_type_is_refused_and_names_the_first() -> None:
    reg = Registry()
    reg.task("embed")(embed)

    def other(job: Any) -> None:
        return None

    with pytest.raises(ConfigurationError) as raised:
        reg.task("embed")(other)

    assert "already has a handler" in str(raised.value)
    assert f"{__name__}.embed" in str(raised.value)
    task = reg.get("embed")
    assert task is not None and task.fn is embed


def test_registering_the_same_function_twice_is_harmless() -> None:
    reg = Registry()
    reg.task("embed")(embed)

    reg.task("embed")(embed)

    assert reg.names() == ["embed"]


@pytest.mark.parametrize(
    ("name", "options", "field"),
    [
        ("bad name", {}, "type"),
        ("embed", {"max_attempts": 0}, "max_attempts"),
        ("embed", {"queue": "no spaces"}, "queue"),
        ("embed", {"lease_seconds": -1}, "lease_seconds"),
    ],
)
def test_bad_decorator_arguments_fail_at_decoration_time(
    name: str, options: dict[str, Any], field: str
) -> None:
    reg = Registry()

    with pytest.raises(InvalidJob) as raised:
        reg.task(name, **options)

    assert raised.value.field == field
    assert reg.names() == []


def test_loading_a_missing_task_module_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="no_such_module_for_tickq"):
        Registry().load_modules(["no_such_module_for_tickq.tasks"])


def test_task_modules_are_read_from_a_comma_separated_list() -> None:
    assert comma_list(" app.tasks, ,app.more ") == ("app.tasks", "app.more")
    assert comma_list(None) == ()


def batch_registry() -> Registry:
    reg = Registry()
    reg.task("embed", queue="gpu", max_attempts=7, priority=3, backoff={"base": 2})(embed)
    reg.task("transcribe")(transcribe)
    return reg


def test_a_batch_of_requests_gets_the_same_specs_as_one_by_one() -> None:
    reg = batch_registry()
    requests: list[dict[str, Any]] = [
        {"type": "embed"},
        {"type": "embed", "payload": {"doc": 1}, "idempotency_key": "k1"},
        {"type": "transcribe", "payload": {}, "idempotency_key": "ключ"},
        {"type": "embed", "payload": None, "priority": 9, "delay": 5},  # not the plain shape
    ]

    assert reg.batch(requests).specs() == [reg.spec(**r) for r in requests]


BAD_REQUESTS: list[Any] = [
    {"type": "nope"},
    {"type": "bad type!"},
    {"type": 7},
    {"payload": {}},
    {"type": "embed", "payload": []},
    {"type": "embed", "payload": {"x": float("nan")}},
    {"type": "embed", "payload": {"x": "\x00"}},
    {"type": "embed", "payload": {"big": "x" * 300_000}},
    {"type": "embed", "idempotency_key": ""},
    {"type": "embed", "idempotency_key": "k" * 256},
    {"type": "embed", "idempotency_key": "a\x00b"},
    {"type": "embed", "idempotency_key": "\ud800"},
    {"type": "embed", "idempotency_key": 5},
    {"type": "nope", "payload": [], "idempotency_key": 5},  # the first fault is reported
    {"type": "embed", "payload": [], "idempotency_key": 5},
    {"type": "embed", "colour": "red"},
]


@pytest.mark.parametrize("request_", BAD_REQUESTS)
def test_a_batch_refuses_what_one_by_one_refuses_with_the_same_message(request_: Any) -> None:
    reg = batch_registry()
    with pytest.raises((InvalidJob, UnknownJobType, TypeError)) as one:
        reg.spec(**request_)

    with pytest.raises(type(one.value)) as batch:
        reg.batch([{"type": "embed"}, request_])

    assert str(batch.value) == str(one.value)
