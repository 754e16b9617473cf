"""`tickq serve`: real HTTP requests fed to ApiFunction's handler as API Gateway would.

Each request becomes an HTTP API (payload format 2.0) event carrying a development JWT
identity, the way the API's JWT authorizer would pass it, and the handler runs in this
process. The server is for one developer's machine: it forges identities, so it listens
on 127.0.0.1 unless told otherwise, and it refuses what a web page elsewhere could send it:
a Host it does not serve (DNS rebinding), an Origin other than its own, and a request with
a body or a state change that is not application/json (a cross-site form or text/plain
POST). Requests are read and answered concurrently, so one slow client stalls nobody; the
handler runs one at a time, because it keeps one database connection and one request's
state per process, exactly as one Lambda environment does.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from queue_core.config import comma_list
from tickq.infra.local.lambda_context import LocalContext

Handler = Callable[[dict[str, Any], Any], Mapping[str, Any]]

DEV_ISSUER = "https://tickq.local/serve"
APP_ROLE = "tickq_app"
# API Gateway's own limit on a request body; bigger ones get 413 before the handler runs.
MAX_BODY_BYTES = 10 * 1024 * 1024
_TEXT_TYPES = ("text/", "application/json", "application/javascript", "image/svg+xml")


@dataclass(frozen=True, slots=True)
class DevIdentity:
    """The signed-in user the local server pretends the JWT authorizer verified."""

    user: str
    # A group of TICKQ_OPERATOR_GROUPS makes the user an operator (see functions/http/ui.py).
    operator_group: str | None = None

    @property
    def operator(self) -> bool:
        return self.operator_group is not None

    def claims(self) -> dict[str, Any]:
        claims: dict[str, Any] = {"sub": self.user, "iss": DEV_ISSUER, "username": self.user}
        if self.operator_group is not None:
            # The JWT authorizer flattens list claims into "[a b]" strings.
            claims["cognito:groups"] = f"[{self.operator_group}]"
        return claims

    def owner_id(self) -> UUID:
        """The UUID that owns this user's rows, as ApiFunction derives it from the claims."""
        from tickq.functions.http.identity import caller_id

        return caller_id(
            {"authorizer": {"jwt": {"claims": self.claims()}}}, owner_issuer=DEV_ISSUER
        )


def operator_group(env: Mapping[str, str]) -> str:
    """The group that makes a development identity an operator, as ApiFunction is configured."""
    from tickq.functions.http.ui import DEFAULT_OPERATOR_GROUPS

    configured = env.get("TICKQ_OPERATOR_GROUPS") or DEFAULT_OPERATOR_GROUPS
    return next(iter(comma_list(configured)), DEFAULT_OPERATOR_GROUPS)


def parse_user(raw: str) -> str:
    """A --user value: a UUID, or a name of letters, digits, '.', '_', '-' or '@'."""
    value = raw.strip()
    try:
        return str(UUID(value))
    except ValueError:
        pass
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
    if not value or len(value) > 128 or not set(value) <= allowed:
        raise ValueError(
            f"--user must be a UUID or a name of letters, digits, '.', '_', '-', '@'; got {raw!r}"
        )
    return value


def http_api_event(
    *,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    identity: DevIdentity,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """The payload format 2.0 event API Gateway's HTTP API sends for this request."""
    parts = urlsplit(target)
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        # API Gateway joins repeated headers with commas, and passes cookies separately.
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    cookies = [c.strip() for c in lowered.pop("cookie", "").split(";") if c.strip()]
    query: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    text, is_base64 = _body_text(body, lowered.get("content-type", ""))
    now = datetime.now(UTC)
    request_id = secrets.token_hex(8)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path or "/",
        "rawQueryString": parts.query,
        "headers": lowered,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "authorizer": {"jwt": {"claims": identity.claims(), "scopes": None}},
            "domainName": lowered.get("host", "localhost"),
            "domainPrefix": lowered.get("host", "localhost").split(".")[0],
            "http": {
                "method": method,
                "path": parts.path or "/",
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": is_base64,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if body:
        event["body"] = text
    return event


def _body_text(body: bytes, content_type: str) -> tuple[str, bool]:
    if content_type.startswith(_TEXT_TYPES) or not content_type:
        try:
            return body.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), True


def response_parts(result: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body bytes from a handler's payload format 2.0 response."""
    if "statusCode" not in result:
        # A bare value is what API Gateway would send as a 200 JSON body.
        return 200, [("Content-Type", "application/json")], json.dumps(result).encode()
    headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((name, str(v)) for v in values)
    headers.extend(("Set-Cookie", c) for c in result.get("cookies") or [])
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
    return int(result["statusCode"]), headers, body


class ApiServer(ThreadingHTTPServer):
    """An HTTP server whose every request is one invocation of `handler`."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        identity: DevIdentity,
        *,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.handler = handler
        self.identity = identity
        self.log = log
        # One invocation at a time, as in one Lambda environment; I/O runs concurrently.
        self.invocation = threading.Lock()
        super().__init__(address, _RequestHandler)

    def allowed_hosts(self) -> set[str]:
        """The Host headers this server answers: its own address, by name or number."""
        host, port = self.server_address[:2]
        names = {str(host), "localhost", "127.0.0.1", "[::1]"}
        if str(host) in ("0.0.0.0", "::"):
            return {f"{name}:{port}" for name in names} | {"*"}
        return {f"{name}:{port}" for name in names}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# A client that stops sending mid-request is dropped after this long.
CLIENT_TIMEOUT_SECONDS = 30


def refusal(
    method: str, headers: Mapping[str, str], allowed_hosts: set[str], has_body: bool
) -> tuple[int, str] | None:
    """Why a request must not reach the handler (status, message), or None."""
    lowered = {k.lower(): v for k, v in headers.items()}
    host = lowered.get("host", "")
    if "*" not in allowed_hosts and host not in allowed_hosts:
        return 421, f"this server does not answer for Host {host[:100]!r}"
    origin = lowered.get("origin")
    if origin is not None and origin != f"http://{host}":
        return 403, f"cross-origin requests are refused (Origin {origin[:100]!r})"
    media = lowered.get("content-type", "").split(";")[0].strip().lower()
    if (has_body or method in STATE_CHANGING) and media != "application/json":
        return 415, "requests with a body or a change must be application/json"
    return None


class _RequestHandler(BaseHTTPRequestHandler):
    server: ApiServer
    server_version = "tickq-serve"
    timeout = CLIENT_TIMEOUT_SECONDS

    def do_GET(self) -> None:
        self._invoke()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _invoke(self) -> None:
        started = time.perf_counter()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._send(400, [("Content-Type", "application/json")], _message("bad Content-Length"))
            return
        if length > MAX_BODY_BYTES:
            self._send(413, [("Content-Type", "application/json")], _message("too large"))
            return
        refused = refusal(
            self.command, dict(self.headers.items()), self.server.allowed_hosts(), length > 0
        )
        if refused is not None:
            status, message = refused
            self._send(status, [("Content-Type", "application/json")], _message(message))
            self._log(status, started)
            return
        body = self.rfile.read(length) if length else b""
        event = http_api_event(
            method=self.command,
            target=self.path,
            headers=dict(self.headers.items()),
            body=body,
            identity=self.server.identity,
            source_ip=self.client_address[0],
        )
        try:
            with self.server.invocation:
                result = self.server.handler(event, LocalContext())
            status, headers, payload = response_parts(result)
        except Exception as exc:  # a crash in the handler is a 502 from API Gateway too
            print(f"tickq serve: handler raised {type(exc).__name__}: {exc}", file=sys.stderr)
            status, headers = 502, [("Content-Type", "application/json")]
            payload = _message("Internal Server Error")
        self._send(status, headers, payload)
        self._log(status, started)

    def _log(self, status: int, started: float) -> None:
        if self.server.log is not None:
            elapsed = (time.perf_counter() - started) * 1000
            self.server.log(f"{self.command} {self.path} → {status} ({elapsed:.0f} ms)")

    def _send(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response(status)
        names = {name.lower() for name, _ in headers}
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        if "content-type" not in names and payload:
            self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: `ApiServer.log` reports each request once, with its timing."""


def _message(text: str) -> bytes:
    return json.dumps({"message": text}).encode()


def api_handler() -> Handler:
    """ApiFunction's handler, imported the way Lambda would import it."""
    # Quiet by default: one line per request from the server beats a JSON log record, an
    # empty-metrics warning and a tracer notice per request. The caller's settings win.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    warnings.filterwarnings("ignore", "No application metrics to publish", UserWarning)
    try:
        from tickq.functions.api import handler
    except ImportError as exc:
        raise ServeError(f"ApiFunction cannot be imported ({exc}); install tickq[aws]") from exc
    return handler


class ServeError(RuntimeError):
    """The local API server cannot start as asked."""


def handler_database_url(conn: psycopg.Connection[Any], url: str | None, role: str | None) -> str:
    """Where the handler connects: the same database as `conn`, acting as `role`.

    ApiFunction itself acts as tickq_app in every user's transaction (and refuses to serve
    on a login that would read past row-level security), so for tickq_app this only checks
    that the login may; the session keeps the login's own role for the operator counts.
    Another role is set for the whole session.
    """
    if url is None:
        # The embedded server: its URL without a password, which it does not need.
        url = conn.info.dsn
    if not role:
        return url
    try:
        with conn.transaction():
            conn.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
    except psycopg.Error as exc:
        raise ServeError(
            f"this database login cannot act as {role} ({exc.diag.message_primary or exc}); "
            "log in as its owner or a superuser, or pass --role '' to keep the login's own"
        ) from None
    if role == APP_ROLE:
        return url
    options = conninfo_to_dict(url).get("options") or ""
    return make_conninfo(url, options=f"{options} -c role={role}".strip())


def run(
    conn: psycopg.Connection[Any],
    *,
    database_url: str | None,
    host: str,
    port: int,
    identity: DevIdentity,
    role: str | None,
    say: Callable[[str], None],
) -> None:
    """Serve until interrupted; ApiFunction runs in this process against `conn`'s database."""
    os.environ["TICKQ_DATABASE_URL"] = handler_database_url(conn, database_url, role)
    # Every identity here is the development issuer's: its UUID users are owners as they
    # are, as DevIdentity.owner_id says (functions/http/identity.py).
    os.environ["TICKQ_OWNER_ISSUER"] = DEV_ISSUER
    handler = api_handler()
    try:
        server = ApiServer((host, port), handler, identity, log=say)
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    operator = " (operator)" if identity.operator else ""
    say(f"signed in as {identity.user}{operator}, owner id {identity.owner_id()}")
    say(f"job list page: {server.url}/ui    API: {server.url}/jobs    Ctrl-C stops")
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a process manager, `kill`) stops the server as cleanly as Ctrl-C does.
        signal.signal(signal.SIGTERM, _interrupt)
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            say("stopped")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
