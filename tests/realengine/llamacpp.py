"""llama.cpp's own server (the `xllamacpp` wheel) in a process of its own, on 127.0.0.1.

    python tests/realengine/llamacpp.py MODEL.gguf PORT [--ctx 32768 --slots 4 --threads 2 --ubatch 512]
runs until SIGTERM; `llamacpp_server()` starts one on a free port and always stops it.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from agentx.engine.launch import stop_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server_process(cmd: list[str], url: str, env: dict | None = None, startup_s: float = 120, health: str = "/health"):
    """Run a server command until its `health` path answers 200; yield; always stop it."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                with urllib.request.urlopen(url + health, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"{cmd[2]} did not start: {log.read()[-3000:].decode(errors='replace')}")
            time.sleep(0.2)
        yield url
    finally:
        stop_process(proc, 30)
        log.close()


def llamacpp_server(model: Path, ctx: int = 32768, slots: int = 4, threads: int = 1, ubatch: int = 512):
    """`ubatch 1` computes every prompt token alone, as a cache hit's last token is: answers are then
    bitwise the same cold and warm (with bigger micro-batches the kernels differ, and a random-weight
    model's near-tied logits can flip). One thread: two wait on each other whenever another process
    holds a core (the probed run took 4 min beside a second test worker, 36 s on one thread)."""
    port = free_port()
    cmd = [sys.executable, __file__, str(model), str(port), "--ctx", str(ctx), "--slots", str(slots),
           "--threads", str(threads), "--ubatch", str(ubatch)]
    return server_process(cmd, f"http://127.0.0.1:{port}")


def main() -> None:
    import xllamacpp

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("port", type=int)
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ubatch", type=int, default=512)
    args = ap.parse_args()
    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.n_ctx = args.ctx
    p.n_parallel = args.slots
    p.cpuparams.n_threads = args.threads
    p.n_ubatch = args.ubatch
    p.hostnames = ["127.0.0.1"]
    p.port = args.port
    p.model_alias = "tiny-llama"
    p.endpoint_metrics = True
    p.endpoint_slots = True
    p.use_jinja = True
    server = xllamacpp.Server(p)  # noqa: F841 - it serves while referenced
    while True:  # the server runs in its own threads until this process is terminated
        time.sleep(3600)


if __name__ == "__main__":
    main()
