"""A page opened in headless Chromium over the DevTools protocol, for the documentation tests.

``open_page(url)`` starts Debian's ``chromium`` with ``--remote-debugging-pipe`` (the protocol
as NUL-terminated JSON on file descriptors 3 and 4: no port, no extra package), loads the page,
waits for its load event, and returns what the page logged as errors (``console.error`` and
``console.assert`` calls, uncaught exceptions, resources that failed to load) and the result
of a JavaScript expression evaluated in it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time


def chromium() -> str | None:
    """The path of the browser, or None where it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int):
        self._w, self._r = write_fd, read_fd
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        return self._next_id

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params=None, session=None, timeout: float = 30.0) -> dict:
        """Sends a command and returns its result; events that arrive meanwhile are kept."""
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for e in self.events:
            if e["method"] == method:
                return e
        while True:
            msg = self._read(deadline)
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg

    def drain(self, seconds: float) -> None:
        """Collects the events of the next `seconds` (late console messages, failed loads)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                msg = self._read(deadline)
                if "method" in msg:
                    self.events.append(msg)
        except TimeoutError:
            pass


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            out.append(f"console.{p['type']}: {args}")
        elif e["method"] == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            out.append(f"uncaught: {d.get('exception', {}).get('description', d.get('text'))}")
        elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
            entry = p["entry"]
            out.append(f"{entry['source']}: {entry['text']} {entry.get('url', '')}".strip())
    return out


def open_page(url: str, expression: str, timeout: float = 60.0) -> tuple[list[str], object]:
    """Loads `url`; returns (the errors the page reported, the value of `expression`)."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def child_fds() -> None:  # the protocol's fixed descriptors: 3 in, 4 out
        # Copies first: the pipes' own descriptors may be 3 or 4 already.
        r, w = os.dup(to_child_r), os.dup(from_child_w)
        os.dup2(r, 3)
        os.dup2(w, 4)
        os.set_inheritable(3, True)
        os.set_inheritable(4, True)

    profile = tempfile.mkdtemp(prefix="tb-chromium-")
    args = [
        exe,
        "--headless",
        "--no-sandbox",  # tests run as root in CI
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        "--remote-debugging-pipe",
        "about:blank",
    ]
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=child_fds,
        # Python's own descriptors are not inheritable; the two dup2'ed above are, and
        # closing the others (close_fds) would close them too.
        close_fds=False,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    pipe = _Pipe(to_child_w, from_child_r)
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)
        session = pipe.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            pipe.call(f"{domain}.enable", session=session)
        pipe.call("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired", timeout=timeout)
        pipe.drain(0.5)
        result = pipe.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"the expression failed: {result['exceptionDetails']}")
        value = result["result"].get("value")
        errors = _errors(pipe.events)
        try:
            pipe.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError):
            pass
        return errors, value
    finally:
        os.close(to_child_w)
        os.close(from_child_r)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
