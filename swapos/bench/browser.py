"""Headless Chromium driven over the DevTools protocol: the live page's browser test
(tests/test_ui_browser.py) and ``bench serve --targets page`` (one page open on ``/ui``
during the trace). Needs the ``browser`` extra (``websockets``) and Debian's ``chromium``.

Why the protocol and not Playwright: Debian's ``chromium`` speaks exactly the protocol of
its own version, so nothing has to match a browser build pinned elsewhere; the client is a
websocket and a few JSON messages (``websockets``' blocking client), with no Node.js driver
process beside the browser on a small machine. The calls block: callers run them in a worker
thread (``anyio.to_thread.run_sync``), so the server on the test's event loop keeps serving
the page meanwhile.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get install -y chromium (Debian's package; .ci/run installs it)"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1100",
    # The page is the only tab and must not be throttled as a background one would be
    # (timers slowed, frames not produced: a screenshot would wait for one forever).
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-port=0",
)


def chromium() -> str | None:
    """The browser's path, or None when it is not installed."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


class CDPError(Exception):
    """The browser answered a command with an error, or a script threw."""


class Browser:
    """One headless Chromium with a fresh profile under ``folder`` and one page.

    Use as a context manager: the browser is stopped on exit.
    """

    def __init__(self, folder: Path, *, start_timeout: float = 60.0) -> None:
        path = chromium()
        if path is None:
            raise FileNotFoundError(f"no chromium: {INSTALL}")
        profile = folder / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        self._log = (folder / "chromium.log").open("wb")
        self._proc = subprocess.Popen(
            [path, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        self._ids = itertools.count(1)
        port, ws_path = self._devtools_port(profile / "DevToolsActivePort", start_timeout)
        # Entered as a context manager, as websockets 17.1 and later require (they warn
        # otherwise); closed with the stack.
        self._ws_stack = contextlib.ExitStack()
        self._ws: ClientConnection = connect(f"ws://127.0.0.1:{port}{ws_path}", max_size=None)
        self._ws_stack.enter_context(self._ws)
        # The tab the browser opened (a new target would start in the background).
        targets = self.call("Target.getTargets")["targetInfos"]
        target = next(t["targetId"] for t in targets if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.page("Page.enable")
        self.page("Runtime.enable")

    def _devtools_port(self, port_file: Path, timeout: float) -> tuple[int, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise CDPError(f"chromium exited with {self._proc.returncode}; see its log")
            lines = port_file.read_text().splitlines() if port_file.exists() else []
            if len(lines) >= 2:
                return int(lines[0]), lines[1]
            time.sleep(0.1)
        raise CDPError(f"chromium did not open its DevTools port within {timeout} s")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._ws_stack.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
            self._log.close()

    def call(
        self, method: str, session: str | None = None, *, timeout: float = 60.0, **params: Any
    ) -> dict[str, Any]:
        """Send one command and return its result within ``timeout`` seconds (events that
        arrive meanwhile are dropped: callers read the page through scripts)."""
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError(f"{method}: no answer within {timeout} s")
            reply = json.loads(self._ws.recv(timeout=left))
            if reply.get("id") != msg_id:
                continue
            if "error" in reply:
                raise CDPError(f"{method}: {reply['error']}")
            result: dict[str, Any] = reply.get("result", {})
            return result

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        """A command to the page's session."""
        return self.call(method, self._session, **params)

    def goto(self, url: str) -> None:
        self.page("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        """The value of a script run in the page (promises awaited)."""
        result = self.page(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression!r} still {value!r} after {timeout} s")

    def screenshot(self, path: Path) -> None:
        shot = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
