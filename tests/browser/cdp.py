"""A small Chrome DevTools Protocol client: Debian's chromium, driven over its websocket.

Only what the browser tests need: open a page, evaluate JavaScript, click like a mouse,
take screenshots. Each browser gets its own profile directory and a free debugging port
that chromium picks itself, so tests in parallel never share anything.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import websocket

CHROMIUM_NAMES = ("chromium", "chromium-browser")
# As root in a container: no sandbox, no GPU, and nothing that phones home.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-allow-origins=*",
    "--remote-debugging-port=0",
    "--window-size=1400,900",
    "--hide-scrollbars",
)


class BrowserError(RuntimeError):
    """The browser did not start, or a DevTools command failed."""


def find_chromium() -> str | None:
    return next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)


def wait_for(check: Callable[[], Any], *, timeout: float = 30.0, what: str = "a condition") -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout`.

    The deadline only bounds a hang on a slow, shared machine; no test asserts on timing.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


class Chromium:
    """A headless chromium process with a throwaway profile; a context manager."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.profile = Path(tempfile.mkdtemp(prefix="tickq-chromium-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> Self:
        log = (self.profile / "chromium.log").open("wb")
        self.process = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        # Chromium writes the port it chose (and the browser target's path) to this file.
        active = self.profile / "DevToolsActivePort"
        try:
            wait_for(self._started(active), timeout=60, what="chromium to start")
        except AssertionError:
            self.close()
            raise BrowserError(f"chromium did not start: {self.log()[-2000:]}") from None
        self.port = int(active.read_text().split()[0])
        return self

    def _started(self, active: Path) -> Callable[[], bool]:
        def check() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise BrowserError(f"chromium exited: {self.log()[-2000:]}")
            return active.exists() and len(active.read_text().split()) >= 2

        return check

    def log(self) -> str:
        path = self.profile / "chromium.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def new_page(self) -> Page:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            target = json.load(response)
        return Page(target["webSocketDebuggerUrl"])

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Page:
    """One tab, driven by DevTools commands over its websocket."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self._ids = itertools.count(1)
        self.console: list[str] = []
        self.send("Runtime.enable")
        self.send("Page.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run one DevTools command and return its result; events seen meanwhile are kept."""
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == message_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            texts = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
            self.console.append(f"{params['type']}: {' '.join(texts)}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.console.append(f"exception: {text}")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        wait_for(
            lambda: self.evaluate("document.readyState") == "complete",
            what=f"{url} to load",
        )

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """Click the element's centre with real mouse events, as a person would."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise BrowserError(f"no element matches {selector!r}")
        x, y = box
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        self.ws.close()
