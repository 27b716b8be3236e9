"""A new user's first hour (issue #28), against the simulated engine (a real server process):
a secured endpoint (credentials on every request, never in a run file), a `/v1` base URL, a 4xx
with a hint, busy ports, a request rate, goodput, the files a run leaves and the commands that
read them."""

import asyncio
import csv
import json
import os
import re
import socket
import subprocess
import sys
import threading

import aiohttp
import pytest
from aiohttp import web

from agentx.engine.launch import sim_server
from agentx.records import read_records
from tests.conftest import WEKA

SPEED = 50
KEY, TEAM = "sk-NEWCOMER-SECRET-1", "team-SECRET-2"
TRACE = WEKA / "trace_0291.json"


def agentx(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


class Gate:
    """A reverse proxy to the sim that refuses (HTTP 401, as `vllm serve --api-key` does) any
    request without `Authorization: Bearer KEY` and `X-Team: TEAM`: the secured endpoint."""

    def __init__(self, upstream: str):
        self.upstream, self.seen, self.refused = upstream, [], 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(request.path)
        if request.headers.get("Authorization") != f"Bearer {KEY}" or request.headers.get("X-Team") != TEAM:
            self.refused += 1
            return web.json_response({"error": "Unauthorized"}, status=401)
        body = await request.read()
        async with self.session.request(request.method, self.upstream + request.path_qs, data=body,
                                        headers={"Content-Type": request.content_type}) as up:
            out = web.StreamResponse(status=up.status, headers={"Content-Type": up.content_type})
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    def _run(self):
        asyncio.set_event_loop(self.loop)

        async def start():
            self.session = aiohttp.ClientSession()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self.handle)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

        self.loop.run_until_complete(start())
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self):
        self.thread.start()
        self.ready.wait(30)
        return self

    def __exit__(self, *exc):
        async def stop():
            await self.session.close()
            await self.runner.cleanup()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.fixture(scope="module")
def gate():
    with sim_server("--speed", str(SPEED)) as url, Gate(url) as g:
        yield g


def bench_args(url, out, *extra):
    return ("bench", "--url", url, "--traces", TRACE, "--concurrency", "2", "--duration", "60", "--clock-scale",
            SPEED, "--warmup-requests-per-lane", "1", "--grace", "5", "--out", out, *extra)


def test_a_secured_endpoint_at_a_v1_url(gate, tmp_path):
    out = tmp_path / "run"
    # (--allow-invalid: the gate, a Python proxy in this process, adds host error the sim's
    # modeled timings expose, which is not what this test is about)
    res = agentx(*bench_args(gate.url + "/v1", out, "--api-key", KEY, "--header", f"X-Team: {TEAM}",
                             "--slo", "ttft:2000 tpot:100", "--html", "--allow-invalid"))
    assert res.returncode == 0, res.stderr
    assert gate.refused == 0 and "/v1/models" in gate.seen and "/metrics" in gate.seen and "/version" in gate.seen
    assert sum(p == "/v1/completions" for p in gate.seen) == len(read_records(out))
    # no credential in any file of the run, the command line it records included
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data and TEAM.encode() not in data, path
    info = json.loads((out / "run.json").read_text())
    assert info["settings"]["headers"] == ["Authorization", "X-Team"] and info["status"] == "complete"
    assert "--api-key <redacted> --header X-Team: <redacted> " in info["command"]
    assert info["settings"]["url"] == gate.url  # the /v1 is the API's prefix, not the base
    # what the run leaves: records.csv (a row per request), report.html, goodput in the summary
    records = read_records(out)
    with open(out / "records.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records) and rows[0]["session"] == records[0].session
    assert (out / "report.html").stat().st_size > 10_000
    good = json.loads((out / "result.json").read_text())["request_metrics"]["goodput"]
    prof = [r for r in rows if r["phase"] == "profile"]
    met = sum(1 for r in prof if not r["error"] and float(r["ttft"]) <= 2.0
              and (not r["itl_s"] or float(r["itl_s"]) <= 0.1))
    assert good["slo_ms"] == {"ttft": 2000.0, "tpot": 100.0} and good["of"] == len(prof) and good["met"] == met
    assert f"goodput: {good['requests_per_s']:.2f} req/s, {met:,} of {len(prof):,}" in res.stdout
    assert "lanes busy" in res.stdout  # the progress line, printed in a log too (stdout is no TTY)
    # the sim publishes its precision: an exported point says bf16
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert agentx("db", "import", out, "--db", db).returncode == 0
    row = json.loads(agentx("db", "export-inferencex", "1", "--db", db).stdout)
    assert row["precision"] == "bf16"


def test_refused_requests_say_why(gate, tmp_path):
    res = agentx(*bench_args(gate.url, tmp_path / "a"))  # no credentials: the model cannot be discovered
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: --api-key: {gate.url}/v1/models answered HTTP 401: the server wants credentials "
        "(--api-key, OPENAI_API_KEY or --header)"]
    res = agentx(*bench_args(gate.url, tmp_path / "b", "--model", "m", "--api-key", KEY))  # X-Team missing
    assert res.returncode == 3
    assert ("hint: the first 8 requests all got HTTP 401 ({\"error\": \"Unauthorized\"}): the server wants "
            "credentials: --api-key KEY (or OPENAI_API_KEY), or --header 'Name: value' (stopped before sending the "
            "rest)") in " ".join(res.stdout.split())
    env = {**os.environ, "OPENAI_API_KEY": KEY}  # the OpenAI clients' convention
    res = agentx(*bench_args(gate.url, tmp_path / "c", "--header", f"X-Team: {TEAM}", "--allow-invalid"), env=env)
    assert res.returncode == 0, res.stderr


def test_context_overflow_hints_at_max_context(tmp_path):
    with sim_server("--speed", str(SPEED), "--max-model-len", "16384") as url:
        res = agentx(*bench_args(url, tmp_path / "o", "--allow-invalid"))
    assert res.returncode == 0, res.stderr
    assert re.search(r"hint: \d+% of requests overflowed the server's context \(16,384 tokens\): replay only what "
                     r"fits with --max-context 16k", " ".join(res.stdout.split()))


def test_a_bad_tokenizer_leaves_no_run_folder(gate, tmp_path):
    res = agentx(*bench_args(gate.url, tmp_path / "t", "--api-key", KEY, "--header", f"X-Team: {TEAM}",
                             "--wire", "chat", "--tokenizer", tmp_path / "missing.json"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "t").exists()


def _busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.parametrize("command", [
    ("sim", "serve", "--port", "{port}"),
    ("capture", "proxy", "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:{port}", "--store", "{tmp}/c.db"),
    ("serve", "--port", "{port}", "--db", "{tmp}/r.db"),
])
def test_a_busy_port_is_one_line(tmp_path, command):
    with _busy_port() as s:
        port = s.getsockname()[1]
        res = agentx(*(c.format(port=port, tmp=tmp_path) for c in command), timeout=120)
    assert res.returncode == 2 and "listening" not in res.stdout
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{port}: the port is in use (another server listens there); "
        "choose another, or 0 for a free one")


def test_ray_without_a_cluster_is_one_line(tmp_path):
    pytest.importorskip("ray")
    plan = tmp_path / "plan.yaml"
    plan.write_text("duration: 10\ngrid: {concurrency: [2]}\n")
    res = agentx("sim", "plan", plan, "--ray", "auto", "--out", tmp_path / "p", "--db", tmp_path / "p.db")
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --ray: no Ray cluster at 'auto' (") and "`ray start --head`" in line


def test_probe_cache_with_credentials_and_a_progress_line(gate):
    refused = gate.refused
    res = agentx("probe", "cache", "--url", gate.url + "/v1", "--api-key", KEY, "--header", f"X-Team: {TEAM}",
                 "--traces", TRACE, "--probes", "2")
    assert res.returncode == 0, res.stderr
    assert gate.refused == refused and "cache probe: 0 of 2 probes" in res.stdout
    assert "cache probe: 0 mismatches in 2 probes" in res.stdout


def test_a_scenario_at_a_request_rate_over_http(gate, tmp_path):
    out = tmp_path / "rate"
    res = agentx("bench", "--url", gate.url, "--api-key", KEY, "--header", f"X-Team: {TEAM}", "--scenario", "1k1k",
                 "--request-rate", "2", "--arrival", "constant", "--duration", "10", "--clock-scale", SPEED,
                 "--grace", "5", "--allow-invalid", "--out", out)
    assert res.returncode == 0, res.stderr
    prof = [r for r in read_records(out) if r.phase == "profile"]
    assert len(prof) == 20 and len({r.session for r in prof}) == 20  # a request per arrival, 0.5 s apart
    planned = sorted(r.planned for r in prof)
    assert all(abs(b - a - 0.5) < 1e-6 for a, b in zip(planned, planned[1:]))
