"""The Lambda handler fixtures (sample events, context) shared with tests/functions; the login
roles come from the root conftest."""

from tests.functions.conftest import (  # noqa: F401  (fixtures are found by name)
    as_app,
    as_worker,
    function_env,
    lambda_context,
    tasks,
)
