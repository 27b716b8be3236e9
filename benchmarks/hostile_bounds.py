"""The heavy checks of issue #46, each printed as a row (run it on two commits for before / after):

- traces: `agentx trace stats` of a 2 GiB sparse file (a valid first line, then NUL bytes; and all
  NUL bytes), and of 10^6 one-request Mooncake sessions, under a 4 GiB address-space limit: exit
  status, lines of stderr, a traceback or not, peak RSS and CPU seconds of the command;
- `agentx serve` under a 2 GiB address-space limit (RLIMIT_AS on the server process): its RSS
  and address space at start, after one rejected upload (the import's modules loaded), after 32
  more rejected uploads (valid run.json / result.json, a 32 MiB records.jsonl of random bytes:
  422), after 32 more (the valid run below with a bad last line in server_metrics.jsonl: read
  whole, then 422); then a valid upload of a real run of about 111 MB (`agentx sim bench`, 27,000 modeled s:
  its run.json, result.json, records.jsonl and server_metrics.jsonl); then 200 concurrent GETs
  over pages and the API; then 1,100 half-open connections from 127.0.0.1 and one GET from
  127.0.0.2.

    python benchmarks/hostile_bounds.py [--part traces|serve|all] [--keep-run DIR]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TOKEN = "s3cret"
AS_LIMIT = 2 << 30
TRACE_AS_LIMIT = 4 << 30  # `trace stats`'s address space (a machine with less memory than this one)
UPLOAD = ("run.json", "result.json", "records.jsonl", "server_metrics.jsonl")


def command(*args: str, limit_as: int | None = None) -> dict:
    """Run `agentx ARGS`: exit status, stderr, peak RSS (MB) and CPU seconds of the process."""
    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    t0 = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "agentx.cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=limit)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": proc.returncode, "stderr": err, "rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.monotonic() - t0}


def trace_rows(work: Path) -> list[tuple[str, dict]]:
    first = (ROOT / "tests/data/mooncake/synthetic_trace_head400.jsonl").read_bytes().split(b"\n", 1)[0] + b"\n"
    rows = []
    for name, head in (("2 GiB sparse: a line, then NULs", first), ("2 GiB sparse: all NULs", b"")):
        path = work / "sparse.jsonl"
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(2 << 30)
        rows.append((name, command("trace", "stats", str(path), limit_as=TRACE_AS_LIMIT)))
        path.unlink()
    path = work / "million.jsonl"
    with open(path, "w") as f:
        for i in range(10**6):
            f.write('{"timestamp": %d, "input_length": 1000, "output_length": 100, "hash_ids": [%d, %d]}\n'
                    % (i * 10, 2 * i, 2 * i + 1))
    rows.append(("10^6 one-request sessions", command("trace", "stats", str(path), limit_as=TRACE_AS_LIMIT)))
    path.unlink()
    return rows


def print_traces(rows) -> None:
    print(f"`agentx trace stats` under RLIMIT_AS {TRACE_AS_LIMIT >> 30} GiB")
    print(f"{'trace file':34} {'exit':>5} {'stderr lines':>12} {'traceback':>9} {'peak RSS MB':>11} {'CPU s':>7}  "
          "last stderr line")
    for name, r in rows:
        lines = r["stderr"].strip().splitlines()
        print(f"{name:34} {r['exit']:>5} {len(lines):>12} {'yes' if 'Traceback' in r['stderr'] else 'no':>9} "
              f"{r['rss_mb']:>11.0f} {r['cpu_s']:>7.1f}  {(lines or [''])[-1][:110]}")


def real_run(out: Path) -> Path:
    if not (out / "result.json").exists():
        subprocess.run([PY, "-m", "agentx.cli", "sim", "bench", "--traces", str(ROOT / "agentx/data/weka"),
                        "--concurrency", "8", "--duration", "27000", "--warmup-requests-per-lane", "2", "--out",
                        str(out), "--agreement", "0"], check=True, stdout=subprocess.DEVNULL, timeout=1800)
    return out


def multipart(files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "agentxbound7c1e"
    parts = [b"--%s\r\nContent-Disposition: form-data; name=\"files\"; filename=\"%s\"\r\n"
             b"Content-Type: application/octet-stream\r\n\r\n%s\r\n" % (boundary.encode(), n.encode(), data)
             for n, data in files]
    return b"".join(parts) + b"--%s--\r\n" % boundary.encode(), f"multipart/form-data; boundary={boundary}"


def post(port: int, body: bytes, kind: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/runs", data=body, method="POST", headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=600) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return type(e).__name__


def memory(pid: int) -> str:
    status = open(f"/proc/{pid}/status").read()
    rss, size = (int(re.search(rf"{k}:\s+(\d+)", status).group(1)) // 1024 for k in ("VmRSS", "VmSize"))
    return f"RSS {rss} MB, address space {size} MB"


def start_server(work: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([PY, "-m", "agentx.cli", "serve", "--db", str(work / "serve.db"), "--port", str(port),
                             "--token", TOKEN, "--upload-dir", str(work / "uploads"), "--request-timeout-s", "60"],
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/points", timeout=2).read()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("agentx serve exited")
            time.sleep(0.2)
    raise RuntimeError("agentx serve did not start")


def get(port: int, path: str, source: str = "127.0.0.1") -> int | str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600, source_address=(source, 0))
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except OSError as e:
        return type(e).__name__
    finally:
        conn.close()


def server_rows(run: Path, work: Path) -> list[tuple[str, str]]:
    rows = []
    proc, port = start_server(work)
    try:
        rows.append(("at start", memory(proc.pid)))
        meta = [(n, (run / n).read_bytes()) for n in ("run.json", "result.json")]
        junk, kind = multipart(meta + [("records.jsonl", os.urandom(32 << 20))])
        rows.append(("1 rejected upload", f"{post(port, junk, kind)}; {memory(proc.pid)}"))
        codes = Counter(post(port, junk, kind) for _ in range(32))
        rows.append(("32 more: random records.jsonl", f"{dict(codes)}; {memory(proc.pid)}"))
        del junk
        files = [(n, (run / n).read_bytes()) for n in UPLOAD]
        files[-1] = (files[-1][0], files[-1][1] + b'{"t": "x"}\n')  # refused at the last line, read whole
        junk, kind = multipart(files)
        codes = Counter(post(port, junk, kind) for _ in range(32))
        rows.append(("32 more: the run, a bad last line", f"{dict(codes)}; {memory(proc.pid)}"))
        del junk, files
        body, kind = multipart([(n, (run / n).read_bytes()) for n in UPLOAD])
        rows.append((f"a valid upload of {len(body) / 1e6:.0f} MB", f"{post(port, body, kind)}; {memory(proc.pid)}"))
        del body
        paths = ["/", "/points/1", "/api/v1/points/1", "/api/v1/points", "/datasets/1", "/points/1/parts/timeline",
                 "/points/1/flames/0", "/api/v1/frontier", "/conversations/1"]
        with ThreadPoolExecutor(200) as pool:
            codes = Counter(pool.map(lambda i: get(port, paths[i % len(paths)]), range(200)))
        rows.append(("200 concurrent GETs", f"{dict(codes)}; {memory(proc.pid)}"))
        rows.append(("1,100 half-open + a GET from .2", half_open(port)))
        rows.append(("at the end", memory(proc.pid)))
    finally:
        proc.terminate()
        proc.wait(30)
    return rows


def half_open(port: int) -> str:
    held = []
    try:
        for _ in range(1100):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET /api/v1/points HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        time.sleep(1)
        return f"other client: {get(port, '/api/v1/points', '127.0.0.2')}"
    finally:
        for s in held:
            s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-run", type=Path, help="Where the 111 MB run is made (or found: reused).")
    parser.add_argument("--part", choices=["traces", "serve", "all"], default="all")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agentx-bounds-"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    print(f"commit {commit.stdout.strip()}, load average {os.getloadavg()[0]:.1f}")
    try:
        if args.part != "serve":
            print_traces(trace_rows(work))
        if args.part == "traces":
            return
        run = real_run(args.keep_run or work / "run111")
        print(f"\n{'agentx serve, RLIMIT_AS 2 GiB':34} outcome")
        for name, outcome in server_rows(run, work):
            print(f"{name:34} {outcome}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
