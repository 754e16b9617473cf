"""Settings.from_env: defaults, parsing, and clear errors on bad values."""

from __future__ import annotations

import pytest

from queue_core.config import Settings
from queue_core.errors import ConfigurationError


def test_empty_environment_gives_the_defaults() -> None:
    settings = Settings.from_env({})

    assert settings == Settings()
    assert settings.queues == ("default",)
    assert settings.database_url is None


def test_values_are_parsed_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "TICKQ_DATABASE_URL": "postgresql://db/app",
            "TICKQ_TASK_MODULES": "app.tasks, app.more ,",
            "TICKQ_QUEUES": "high,low",
            "TICKQ_BATCH_SIZE": "25",
            "TICKQ_CONCURRENCY": "4",
            "TICKQ_LEASE_SECONDS": "120",
            "TICKQ_PREPARE_THRESHOLD": "0",
        }
    )

    assert settings.database_url == "postgresql://db/app"
    assert settings.task_modules == ("app.tasks", "app.more")
    assert settings.queues == ("high", "low")
    assert (settings.batch_size, settings.concurrency, settings.lease_seconds) == (25, 4, 120)
    assert settings.prepare_threshold == 0


@pytest.mark.parametrize("value", ["off", "OFF", "none", ""])
def test_prepared_statements_can_be_turned_off(value: str) -> None:
    assert Settings.from_env({"TICKQ_PREPARE_THRESHOLD": value}).prepare_threshold is None


def test_empty_values_fall_back_to_defaults() -> None:
    settings = Settings.from_env({"TICKQ_DATABASE_URL": "", "TICKQ_BATCH_SIZE": ""})

    assert settings.database_url is None
    assert settings.batch_size == 10


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TICKQ_BATCH_SIZE", "ten", "must be an integer"),
        ("TICKQ_BATCH_SIZE", "0", "between 1 and 10000"),
        ("TICKQ_CONCURRENCY", "1001", "between 1 and 1000"),
        ("TICKQ_LEASE_SECONDS", "-5", "between 1 and 43200"),
        ("TICKQ_LEASE_SECONDS", "1.5", "must be an integer"),
        ("TICKQ_PREPARE_THRESHOLD", "sometimes", "must be an integer"),
    ],
)
def test_bad_values_raise_a_configuration_error_naming_the_variable(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        Settings.from_env({name: value})

    assert name in str(raised.value)
