"""Start an agentx server (the simulated engine, the capture proxy) in a process of its own, and stop it."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from agentx.errors import AgentxError

_LISTENING = re.compile(r"listening on (http://\S+)")


@contextmanager
def sim_server(*args: str, startup_s: float = 60.0, log_path=None):
    """Yield the base URL of a simulated engine started with `args` (flags of `sim serve`)."""
    with agentx_server("sim", "serve", "--host", "127.0.0.1", "--port", "0", *args, startup_s=startup_s,
                       log_path=log_path) as url:
        yield url


@contextmanager
def agentx_server(*args: str, startup_s: float = 60.0, log_path=None):
    """Run `agentx ARGS` (a server that prints "listening on URL") and yield the URL; stop it after.
    Its stderr goes to `log_path` when given (else a temporary file, shown if it fails to start)."""
    log = open(log_path, "w+") if log_path else tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "agentx.cli", *args], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        yield _wait_listening(proc, log, startup_s, args[0])
    finally:
        stop_process(proc)
        proc.stdout.close()
        log.close()


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `grace_s`."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_listening(proc: subprocess.Popen, log, startup_s: float, what: str) -> str:
    """The URL of the server's "listening on" line. Its stdout is read as raw bytes as they come:
    a buffered readline could hold the line in its buffer (written with the ones before it)
    while select() waits for more bytes that never come."""
    deadline = time.monotonic() + startup_s
    fd, seen = proc.stdout.fileno(), b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=0.2):
                chunk = os.read(fd, 1 << 16)
                seen += chunk
                whole = seen[:seen.rfind(b"\n") + 1].decode(errors="replace")  # complete lines only
                if m := _LISTENING.search(whole):
                    return m.group(1)
                if not chunk and proc.poll() is not None:
                    break
    log.seek(0)
    raise AgentxError(f"agentx {what} did not start: {log.read().strip() or 'no output'}")
