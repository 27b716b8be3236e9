"""Start a sweep deployment's server (a `command`, or the simulated engine for `sim`), wait until
it is healthy, and stop it after (SIGTERM to its process group, then SIGKILL). Its output goes to
`server.log` beside the deployment's points."""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from agentx.errors import AgentxError
from agentx.results.recipe import Deployment

STOP_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sim_command(options: dict) -> str:
    """The `agentx sim serve` command line of a `sim:` target ({port} left to fill)."""
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False:
            flags += [flag, str(value)]
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "agentx.cli", "sim", "serve", "--host",
                                             "127.0.0.1", *flags]) + " --port {port}"


def healthy(url: str) -> bool:
    for path in ("/health", "/v1/models"):
        try:
            with urllib.request.urlopen(url.rstrip("/") + path, timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            continue
    return False


def _die_with_parent() -> None:
    """In the child: SIGKILL when the sweep dies (a killed sweep leaves no server behind)."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@contextmanager
def running(dep: Deployment, folder: Path):
    """Yield the base URL of the deployment's server, healthy."""
    if dep.kind == "url":
        if not healthy(dep.url):
            raise AgentxError(f"deployment {dep.name}: {dep.url} is not healthy (no 200 from /health or /v1/models)")
        yield dep.url
        return
    port = free_port()
    command = (sim_command(dep.sim) if dep.kind == "sim" else dep.command).replace("{port}", str(port))
    url = (dep.url or "http://127.0.0.1:{port}").replace("{port}", str(port))
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "server.log"
    with open(log_path, "ab") as log:
        log.write(f"# agentx sweep: {command}\n".encode())
        log.flush()
        # bash runs a simple command in its own process (exec), so the parent-death signal reaches the server
        proc = subprocess.Popen(command, shell=True, executable=shutil.which("bash") or "/bin/sh", stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else os.setsid)
    try:
        _wait_healthy(dep, proc, url, log_path)
        yield url
    finally:
        stop(proc)


def _wait_healthy(dep: Deployment, proc: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + dep.health_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AgentxError(f"deployment {dep.name}: the server command exited with status {proc.returncode} "
                              f"before it was healthy (log: {log_path})")
        if healthy(url):
            return
        time.sleep(0.25)
    raise AgentxError(f"deployment {dep.name}: {url} not healthy after {dep.health_timeout:g} s (log: {log_path})")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after STOP_GRACE_S."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.wait()
