"""A real headless Chromium (Debian's ``chromium``; bin/test installs it), driven over the DevTools
protocol through ``--remote-debugging-pipe``: JSON messages on file descriptors 3 (to the browser)
and 4 (from it), NUL-terminated. Standard library only; no browser download.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
KEY_CODES = {"Tab": 9, "Enter": 13, "ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40, "Home": 36}


class Browser:
    """``with Browser(profile) as b: page = b.open(url, 1366, 768)``."""

    def __init__(self, profile: Path):
        if CHROMIUM is None:
            pytest.fail("chromium not found: install Debian's chromium (bin/test does)")
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()

        def wire() -> None:  # in the child: its ends of the pipes become fds 3 and 4
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        cmd = [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        self.proc = subprocess.Popen(
            cmd,
            pass_fds=(3, 4, to_child, from_child),
            preexec_fn=wire,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close")
        except (OSError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._out)
        os.close(self._in)

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str) -> dict:
        while True:
            for n, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(n)
            self.events.append(self._read())

    def open(self, url: str, width: int, height: int) -> Page:
        """A new tab with a ``width`` x ``height`` viewport, ``url`` loaded (its load event fired)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        page.send("Page.enable")
        page.send("Page.navigate", {"url": url})
        loaded = (
            f"document.readyState === 'complete' && location.href.split('#')[0] === {json.dumps(url.split('#')[0])}"
        )
        while not page.eval(loaded):  # (a load event of the blank tab may come first)
            self.wait_event("Page.loadEventFired", session)
        return page


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A real mouse click (press and release of the left button) at viewport point x, y."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def centre(self, selector: str) -> tuple[float, float]:
        """Viewport coordinates of the centre of the first element ``selector`` matches."""
        return tuple(
            self.eval(
                f"(() => {{const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                "return [r.x + r.width / 2, r.y + r.height / 2];})()"
            )
        )

    def click_on(self, selector: str) -> None:
        self.click(*self.centre(selector))

    def hover(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def key(self, key: str) -> None:
        """A key press as a keyboard sends it (default actions such as Tab's focus move included)."""
        code = KEY_CODES[key]
        for kind in ("rawKeyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code})

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path
