"""A headless Chromium driven over the DevTools protocol, for testing pages as a user sees them.

The browser talks over a pipe (``--remote-debugging-pipe``: commands on its fd 3, replies and
events on its fd 4, each a JSON message ended by a NUL), so no port, no websocket library and
no driver download are needed: the distribution's ``chromium`` package is enough. The network
is refused to it (a proxy that does not exist, every host name unresolvable), and every
request it makes, every console message of level error and every uncaught exception is
recorded, so a test can assert that a page fetched nothing and complained about nothing."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = ("no Chromium found (looked for chromium, chromium-browser, google-chrome, or "
           "$MLBENCH_CHROMIUM): on Debian or Ubuntu `apt-get install chromium`, on Fedora "
           "`dnf install chromium`, on macOS `brew install --cask chromium`")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         # the network, refused: no proxy listens on port 9, and no host name resolves
         "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND")


def find() -> str | None:
    """The browser to run, or None."""
    named = os.environ.get("MLBENCH_CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    return next((found for name in NAMES if (found := shutil.which(name))), None)


class Page:
    """One tab, and what it did: ``requests`` (every URL asked for), ``problems`` (console
    errors, uncaught exceptions, failed loads)."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session
        self.requests: list[str] = []
        self.problems: list[str] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                          awaitPromise=True)
        if "exceptionDetails" in reply:
            raise AssertionError(f"{expression[:60]}...: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {expression}")

    def screenshot(self, path: Path) -> Path:
        reply = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.write_bytes(base64.b64decode(reply["data"]))
        return path

    def event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Network.loadingFailed":
            self.problems.append(f"load failed: {params.get('errorText')} "
                                 f"({params.get('blockedReason') or params.get('type')})")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.problems.append("console: " + " ".join(
                str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.problems.append("exception: " + str(
                (details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.problems.append(f"log: {params['entry']['text']} ({params['entry'].get('url')})")


class Browser:
    def __init__(self, executable: str, folder: Path, size: tuple[int, int]) -> None:
        to_child, self._commands = _high(os.pipe())
        self._replies, from_child = _high(os.pipe())
        # the browser's ends become its fds 3 and 4; numbered 64 and up here, neither is
        # itself a 3 or a 4 that the other redirection would overwrite first (bash: dash
        # takes one-digit descriptors only)
        script = f'exec "$0" "$@" 3<&{to_child} 4>&{from_child} {to_child}<&- {from_child}>&-'
        flags = [*FLAGS, f"--user-data-dir={folder}", f"--window-size={size[0]},{size[1]}"]
        self.log = folder / "chromium.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [shutil.which("bash") or "/bin/bash", "-c", script, executable, *flags,
                 "about:blank"],
                pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log)
        os.close(to_child)
        os.close(from_child)
        self._next = 0
        self._replies_q: queue.Queue[dict[str, Any]] = queue.Queue()
        self.pages: dict[str, Page] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._replies, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    page = self.pages.get(message.get("sessionId", ""))
                    if "method" in message and page is not None:
                        page.event(message["method"], message["params"])
                    elif "id" in message:
                        self._replies_q.put(message)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str = "",
             timeout: float = 60.0) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._commands, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise AssertionError(f"{method}: the browser is gone; its log: "
                                 f"{self.log.read_text(errors='replace')[-2000:]}") from None
        while True:
            reply = self._replies_q.get(timeout=timeout)
            if reply["id"] == self._next:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> Page:
        """A new tab with the watchers on, then ``url`` loaded in it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = self.pages[session] = Page(self, session)
        for domain in ("Page", "Network", "Runtime", "Log"):
            page.send(f"{domain}.enable")
        page.send("Page.navigate", url=url)
        page.wait_for("document.readyState === 'complete'")
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (AssertionError, queue.Empty, OSError):
            pass  # already gone, or not answering: it is killed below either way
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """The pipe's two ends moved to descriptors numbered 64 and up."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved[0], moved[1]


@contextmanager
def chromium(executable: str, size: tuple[int, int] = (1400, 1000)) -> Iterator[Browser]:
    with tempfile.TemporaryDirectory(prefix="mlbench-chromium-") as profile:
        browser = Browser(executable, Path(profile), size)
        try:
            yield browser
        finally:
            browser.close()
