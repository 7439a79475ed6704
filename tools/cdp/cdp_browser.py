"""A headless Chromium driven over the DevTools protocol through a pipe
(--remote-debugging-pipe): no driver, no browser download, Python's standard
library only. Used by the dashboard's browser test and benchmark.
"""
import base64
import fcntl
import json
import os
import subprocess
import time


class Browser:
    """Chromium with --remote-debugging-pipe: commands on fd 3, replies on fd 4."""

    def __init__(self, binary, profile):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire():
            # Move both ends above 4 first (either may be fd 3 or 4), then
            # dup2, which also clears close-on-exec.
            reader = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            writer = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(reader, 3)
            os.dup2(writer, 4)

        self.process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
             "--window-size=1400,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=wire, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._buffer = b""
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method, params=None, timeout=30.0):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(f"{method}: no reply in {timeout} s")

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def text(browser, selector):
    return browser.evaluate(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
        f"return e ? e.textContent : null; }})()")
