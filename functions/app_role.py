"""ApiFunction acts as tickq_app whatever login its secret names, or refuses to serve.

Row-level security is what keeps one user's jobs from another, and PostgreSQL skips it for
superusers, roles with BYPASSRLS and (without FORCE) the table's owner. Every user-scoped
transaction therefore starts with `tickq.act_as_app()` (the store's user scope), and each new
connection is checked once: if the login cannot become tickq_app and would read past
row-level security, every request is refused with 503 rather than served unscoped.
"""

from __future__ import annotations

from typing import Any

import psycopg

from queue_core import TickqError
from queue_core.postgres import translate_errors
from queue_core.postgres.statements import QUERIES
from tickq.functions.observability import logger

# The connection whose login passed the check; a refused one is checked again next time,
# so a grant takes effect without a redeploy.
_verified: psycopg.Connection[Any] | None = None


class LoginBypassesSecurity(TickqError):
    """The database login would read every user's jobs and cannot act as tickq_app."""


def ensure_scoped(conn: psycopg.Connection[Any]) -> None:
    """Raise LoginBypassesSecurity unless user transactions on `conn` obey row-level security."""
    global _verified
    if conn is _verified:
        return
    with translate_errors(), conn.transaction():
        conn.execute(QUERIES["app_role_enter"])
        row = conn.execute(QUERIES["app_role_bypass"]).fetchone()
    reason, login = row if row is not None else ("cannot be checked", "?")
    if reason is not None:
        fix = (
            f"grant tickq_app to {login} (or give the API a login that is a member of "
            "tickq_app, see docs/operations.md)"
        )
        logger.error(
            f"refusing to serve: the database login {login} {reason} and cannot act as "
            f"tickq_app, so row-level security would not scope users; fix: {fix}"
        )
        raise LoginBypassesSecurity(
            "the API's database login would bypass row-level security; see the function log"
        )
    _verified = conn
