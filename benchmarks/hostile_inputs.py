"""Hostile inputs at every entry point of issue #26, tried as a hostile user would, with a table of
outcomes per surface: run folders (`db import`), AIPerf sets (`db import-aiperf`), recipes
(`sweep`), session logs (`capture import`), uploads, hostile ids and labels on the API and pages,
200 concurrent readers and a writer under a 2 GB address-space limit, slow clients.

Refused = one line naming the file / record / field (or a 4xx), nothing stored, nothing left in
the upload folder; accepted = taken; defect = traceback, multi-line error, 5xx, hang, partial
store, leftover upload. A real run on the sim is made first (and one whose requests all fail).

    python benchmarks/hostile_inputs.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import hostile_cases as hc  # noqa: E402
from tests.hostile_runs import HOSTILE_IDS, ID_ROUTES, classify, db_counts, multipart, run_cases, upload_files  # noqa: E402,E501

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TOKEN = "s3cret"
HOSTILE_LABELS = ["<!--<script>", "</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                  "\u2028\u2029 & \"'<>", "javascript:alert(1)", "<svg onload=alert(1)>"]


def real_runs(folder: Path) -> tuple[Path, Path]:
    from agentx.data import sample_traces
    from agentx.engine.launch import sim_server

    with sim_server("--speed", "50") as url:
        for name, extra in (("ok", []), ("failed", ["--model", "nosuchmodel"])):
            subprocess.run([PY, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(sample_traces()),
                            "--concurrency", "2", "--duration", "150", "--clock-scale", "50", "--gpus", "8",
                            "--hardware", "H200", "--engine", "agentx-sim", "--warmup-requests-per-lane", "2",
                            "--grace", "10", "--out", str(folder / name), *extra], capture_output=True, timeout=600)
    return folder / "ok", folder / "failed"


def surface_run_folders(base: Path, failed: Path, work: Path, quick: bool) -> list:
    from agentx.results.db import connect
    from agentx.results.importer import import_run

    engine = connect(f"sqlite:///{work / 'folders.db'}")
    cases = hc.run_folder_cases(base)[:: 4 if quick else 1]
    results = run_cases(cases, lambda p: import_run(engine, p), engine)
    results.append(("a real run whose requests all failed", *classify(lambda: import_run(engine, failed), engine)))
    return results


def surface_batch(base: Path, work: Path) -> list:
    """A batch of three folders, one broken: the CLI stores two, refuses one, names each."""
    folder = work / "batch"
    for name in ("a", "b", "c"):
        shutil.copytree(base, folder / name)
        info = json.loads((folder / name / "run.json").read_text())
        info["run_id"] = f"batch-{name}"
        (folder / name / "run.json").write_text(json.dumps(info))
    (folder / "b" / "result.json").write_text("[]")
    res = subprocess.run([PY, "-m", "agentx.cli", "db", "import", str(folder), "--db", str(work / "batch.db")],
                         capture_output=True, text=True, timeout=300)
    said = res.stdout + res.stderr
    ok = (res.returncode == 2 and "Traceback" not in said and said.count("stored as point") == 2
          and "b: refused" in said and "1 of 3 run folders refused" in said)
    return [("a batch with one broken folder", "refused" if ok else "defect", said[-300:])]


def surface_aiperf(work: Path, quick: bool) -> list:
    from typer.testing import CliRunner

    from agentx.cli import app
    from agentx.results.aiperf import import_aiperf
    from agentx.results.db import connect

    base = ROOT / "tests" / "results" / "data" / "aiperf"
    engine = connect(f"sqlite:///{work / 'aiperf.db'}")
    cases = hc.aiperf_cases(base)[:: 3 if quick else 1]
    results = run_cases(cases, lambda p: import_aiperf(engine, p, {"hardware": "H200", "gpus": 8}), engine)
    runner = CliRunner()
    for gpus in ("0", "-8", "1e20", "100000000000000000000", "eight"):
        res = runner.invoke(app, ["db", "import-aiperf", str(base), "--gpus", gpus, "--db", str(work / "g.db")])
        results.append((f"--gpus {gpus}", "refused" if res.exit_code == 2 else "defect", res.output[-200:]))
    return results


def surface_recipes(work: Path, quick: bool) -> list:
    from agentx.results.recipe import load_recipe

    cases = hc.recipe_cases()[:: 3 if quick else 1]
    results = run_cases(cases, load_recipe)
    # a refused recipe leaves nothing in the database (the CLI end to end)
    recipe = work / "bad.yaml"
    recipe.write_text(json.dumps({**hc.RECIPE, "bench": {"grace": "soon"}}))
    res = subprocess.run([PY, "-m", "agentx.cli", "sweep", str(recipe), "--db", str(work / "sweep.db"), "--out",
                          str(work / "sweep-out")], capture_output=True, text=True, timeout=300)
    from agentx.results.db import connect
    stored = db_counts(connect(str(work / "sweep.db")))
    ok = res.returncode == 2 and "bench.grace" in res.stderr and sum(stored) == 0 and "--" not in res.stderr
    results.append(("sweep with a refused recipe: nothing stored", "refused" if ok else "defect", res.stderr[-200:]))
    return results


def surface_logs(work: Path, quick: bool) -> list:
    from agentx.capture.agentlogs import import_logs
    from agentx.capture.export import ExportConfig
    from tests.capture.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(work / "tokenizer.json")

    results = []
    for name, make in hc.log_cases()[:: 3 if quick else 1]:
        folder = Path(tempfile.mkdtemp(prefix="hostile-"))
        try:
            path = make(folder)
            cfg = ExportConfig(store="", tokenizer=str(tokenizer), out=str(folder / "out"))
            stores = ([], [path]) if name.startswith("codex") else ([path], [])
            results.append((name, *classify(lambda: import_logs(cfg, *stores))))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def out_is_a_file(folder: Path):
        from tests.capture.agentlogs_files import claude_store
        claude_store(folder / "logs")
        (folder / "out").write_text("x")
        return import_logs(ExportConfig(store="", tokenizer=str(tokenizer), out=str(folder / "out")),
                           [folder / "logs"], [])

    folder = Path(tempfile.mkdtemp())
    results.append(("--out a file", *classify(lambda: out_is_a_file(folder))))
    shutil.rmtree(folder, ignore_errors=True)
    return results


def _client(engine, upload_dir: Path, **kw):
    from fastapi.testclient import TestClient

    from agentx.report.pages import add_pages
    from agentx.results.api import create_app

    app = create_app(engine, token=TOKEN, upload_dir=upload_dir, **kw)
    add_pages(app, engine)
    return TestClient(app, raise_server_exceptions=False)


def surface_uploads(base: Path, work: Path, quick: bool) -> list:
    from agentx.results.db import connect

    engine = connect(f"sqlite:///{work / 'uploads.db'}")
    uploads = work / "uploads"
    client = _client(engine, uploads, max_upload_bytes=64 << 20)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    results = []
    cases = hc.run_folder_cases(base)[:: 6 if quick else 2]
    for name, make in cases:
        folder = Path(tempfile.mkdtemp())
        try:
            files = upload_files(make(folder))
            if files is None:
                continue
            before = db_counts(engine)
            r = client.post("/api/v1/runs", files=files, headers=auth)
            left = list(uploads.iterdir()) if uploads.exists() else []
            if r.status_code >= 500 or left:
                results.append((name, "defect", f"{r.status_code} {r.text[:100]} left={len(left)}"))
            elif r.status_code == 201:
                results.append((name, "accepted", ""))
                shutil.rmtree(uploads, ignore_errors=True)
            else:
                results.append((name, "refused" if db_counts(engine) == before else "defect", r.text[:100]))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    garbage = [("files", ("run.json", (base / "run.json").read_bytes())),
               ("files", ("result.json", (base / "result.json").read_bytes())),
               ("files", ("records.jsonl", os.urandom(50 << 20)))]
    for name, kw, want in (
            ("no token, no files", {}, 401), ("wrong token, no files", {"headers": {"Authorization": "Bearer x"}}, 401),
            ("no token, a 50 MB body", {"files": garbage}, 401),
            ("50 MB of random records.jsonl", {"files": garbage, "headers": auth}, 422),
            ("a file named ../evil.json", {"files": [("files", ("../evil.json", b"{}"))], "headers": auth}, 422),
            ("100 files", {"files": [("files", (f"f{i}", b"x")) for i in range(100)], "headers": auth}, 422),
            ("a body over --max-upload-mb", {"files": [("files", ("records.jsonl", b"x" * (65 << 20)))],
                                            "headers": auth}, 413)):
        r = client.post("/api/v1/runs", **kw)
        left = list(uploads.iterdir()) if uploads.exists() else []
        ok = r.status_code == want and not left
        results.append((name, "refused" if ok else "defect", f"{r.status_code} {r.text[:100]}"))
    return results


def labelled_run(base: Path, folder: Path, n: int) -> Path:
    """A copy of the run with hostile labels and a hostile session name."""
    run = folder / f"hostile-{n}"
    shutil.copytree(base, run)
    result = json.loads((run / "result.json").read_text())
    label = HOSTILE_LABELS[n % len(HOSTILE_LABELS)]
    result["identity"].update(model=label, engine=label[:100], precision=label[:50], dataset=label)
    result["provenance"]["run_id"] = f"hostile-{n}"
    (run / "result.json").write_text(json.dumps(result))
    info = json.loads((run / "run.json").read_text())
    info["run_id"] = f"hostile-{n}"
    (run / "run.json").write_text(json.dumps(info))
    (run / "records.parquet").unlink()
    text = (run / "records.jsonl").read_text()
    first = json.loads(text.splitlines()[0])["session"]
    (run / "records.jsonl").write_text(text.replace(json.dumps(first), json.dumps(label)))
    return run


def surface_ids_and_labels(base: Path, work: Path) -> tuple[list, list]:
    from agentx.results.db import connect
    from agentx.results.importer import import_run

    engine = connect(f"sqlite:///{work / 'pages.db'}")
    for n in range(len(HOSTILE_LABELS)):
        import_run(engine, labelled_run(base, work, n))
    import_run(engine, base)  # a run with records.parquet too (its flamegraphs read it with pyarrow)
    client = _client(engine, work / "up2")
    ids = []
    for route in ID_ROUTES:
        for value in HOSTILE_IDS:
            r = client.get(route.format(value))
            ids.append((route.format(value), "refused" if r.status_code in (404, 422) else
                        "accepted" if r.status_code < 500 else "defect", str(r.status_code)))
    pages = ["/", "/points/1", "/points/2", "/datasets/1", "/conversations/1", "/points/1/parts/timeline",
             "/points/1/parts/timeline_lane", "/points/1/flames/0", "/api/v1/points/1"]
    labels = []
    for page in pages:
        r = client.get(page)
        problem = _script_problem(r.text) if r.headers.get("content-type", "").startswith("text/html") else \
            _json_problem(r.content)
        labels.append((page, "defect" if r.status_code != 200 or problem else "drawn", problem or ""))
    return ids, labels


def _script_problem(html: str) -> str | None:
    """A hostile label that escaped its context: a <script> element holding `<!--`, `<script` or a
    closing tag inside it, or JSON data that does not parse."""
    for body in re.findall(r"<script[^>]*>(.*?)</script>", html, flags=re.S):
        if "<!--" in body or "<script" in body.lower():
            return "a script element holds <!-- or <script"
    return None


def _json_problem(data: bytes) -> str | None:
    try:
        json.loads(data, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as e:
        return f"not standard JSON ({e})"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(db: str, limit_as: int | None, timeout_s: float = 20.0):
    port = free_port()

    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    proc = subprocess.Popen([PY, "-m", "agentx.cli", "serve", "--db", db, "--port", str(port), "--token", TOKEN,
                             "--upload-dir", str(Path(db).parent / "serve-uploads"), "--request-timeout-s",
                             str(timeout_s)], preexec_fn=limit, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import urllib.request
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/points", timeout=2).read()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode())
            time.sleep(0.2)
    raise RuntimeError("agentx serve did not start")


def surface_load(base: Path, work: Path) -> list:
    """200 concurrent GETs over the pages and the API, and uploads beside them, on a server limited
    to 2 GB of address space."""
    import urllib.error
    import urllib.request

    db = work / "pages.db"
    proc, port = serve(str(db), 2 << 30)
    paths = ["/", "/points/1", "/points/2", "/api/v1/points/1", "/api/v1/points", "/datasets/1",
             "/points/1/parts/timeline", "/points/1/flames/0", "/api/v1/frontier", "/conversations/1",
             f"/points/{len(HOSTILE_LABELS) + 1}", f"/points/{len(HOSTILE_LABELS) + 1}/flames/1"]

    def get(i: int):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{paths[i % len(paths)]}", timeout=300) as r:
                r.read()
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError as e:
            return type(e).__name__

    def upload(i: int):
        body, kind = multipart(upload_files(labelled_run(base, work / f"w{i}", 100 + i)))
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/runs", data=body, method="POST", headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": kind})
        try:
            with urllib.request.urlopen(request, timeout=300) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    try:
        with ThreadPoolExecutor(210) as pool:
            writers = [pool.submit(upload, i) for i in range(5)]
            readers = list(pool.map(get, range(200)))
            written = [w.result() for w in writers]
        status = open(f"/proc/{proc.pid}/status").read()
        peak = re.search(r"VmPeak:\s+(\d+)", status).group(1)
        rss = re.search(r"VmHWM:\s+(\d+)", status).group(1)
    finally:
        proc.terminate()
        proc.wait(30)
    counts = Counter(readers)
    print(f"  load: readers {dict(counts)}, writer uploads {written}, server peak virtual {int(peak) // 1024} MB, "
          f"peak resident {int(rss) // 1024} MB (limit 2048 MB of address space)")
    return [(f"GET {i}", "served" if s == 200 else "defect", str(s)) for i, s in enumerate(readers)] + \
        [(f"upload {i}", "served" if s == 201 else "defect", str(s)) for i, s in enumerate(written)]


def surface_slow(work: Path) -> list:
    """Slow and half-sent requests: each connection must be closed by the server within 30 s."""
    proc, port = serve(str(work / "pages.db"), None, timeout_s=20.0)
    kinds = {"silent": b"", "half a head": b"GET /api/v1/points HTTP/1.1\r\nHost: x\r\n",
             "a head byte by byte": b"GET /api/v1/po",
             "half an upload body": (b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                     TOKEN.encode() + b"\r\nContent-Length: 100000\r\nContent-Type: multipart/form-data;"
                                     b" boundary=b\r\n\r\n--b\r\n")}

    def attempt(kind: str) -> tuple[str, float]:
        s = socket.create_connection(("127.0.0.1", port))
        t0 = time.monotonic()
        s.settimeout(1.0)
        s.sendall(kinds[kind])
        while time.monotonic() - t0 < 60:
            try:
                if kind == "a head byte by byte":
                    s.sendall(b"i")  # a byte a second: the deadline is on the whole request
                if s.recv(4096) == b"":
                    return kind, time.monotonic() - t0
            except socket.timeout:
                continue
            except OSError:
                return kind, time.monotonic() - t0
        return kind, float("inf")

    try:
        with ThreadPoolExecutor(40) as pool:
            done = list(pool.map(attempt, [k for k in kinds for _ in range(10)]))
    finally:
        proc.terminate()
        proc.wait(30)
    worst = max(t for _, t in done)
    print(f"  slow clients: {len(done)} connections, closed after {min(t for _, t in done):.1f}-{worst:.1f} s "
          "(request timeout 20 s)")
    return [(kind, "closed" if t <= 30 else "defect", f"{t:.1f} s") for kind, t in done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Every third case or so (a smoke run).")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agentx-hostile-"))
    try:
        t0 = time.monotonic()
        base, failed = real_runs(work)
        surfaces = {
            "run folders (db import)": surface_run_folders(base, failed, work, args.quick) + surface_batch(base, work),
            "AIPerf sets (db import-aiperf)": surface_aiperf(work, args.quick),
            "recipes (sweep)": surface_recipes(work, args.quick),
            "session logs (capture import)": surface_logs(work, args.quick),
            "uploads (POST /api/v1/runs)": surface_uploads(base, work, args.quick),
        }
        ids, labels = surface_ids_and_labels(base, work)
        surfaces["hostile ids (pages and API)"] = ids
        surfaces["hostile labels (every page)"] = labels
        surfaces["200 readers + a writer, 2 GB limit"] = surface_load(base, work)
        surfaces["slow clients"] = surface_slow(work)
        print(f"\n{'surface':<38} {'tried':>6} {'refused':>8} {'accepted':>9} {'ok':>6} {'defects':>8}")
        total = Counter()
        for name, results in surfaces.items():
            c = Counter(outcome for _, outcome, _ in results)
            ok = c["drawn"] + c["served"] + c["closed"]
            total.update({"tried": len(results), "refused": c["refused"], "accepted": c["accepted"], "ok": ok,
                          "defect": c["defect"]})
            print(f"{name:<38} {len(results):>6} {c['refused']:>8} {c['accepted']:>9} {ok:>6} {c['defect']:>8}")
        print(f"{'total':<38} {total['tried']:>6} {total['refused']:>8} {total['accepted']:>9} {total['ok']:>6} "
              f"{total['defect']:>8}")
        for name, results in surfaces.items():
            for case, outcome, detail in results:
                if outcome in ("defect", "accepted"):
                    print(f"  {outcome}: {name}: {case}: {detail[:160]}")
        print(f"({time.monotonic() - t0:.0f} s; load average {os.getloadavg()[0]:.2f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
