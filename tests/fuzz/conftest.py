"""The Lambda handler fixtures (logins, sample events, context) shared with tests/functions."""

from tests.functions.conftest import (  # noqa: F401  (fixtures are found by name)
    app_login_url,
    as_app,
    as_worker,
    function_env,
    lambda_context,
    tasks,
    worker_login_url,
)
