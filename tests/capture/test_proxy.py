"""The recording proxy under load and under failure (real proxy and sim processes)."""

import asyncio
import hashlib
import json
import signal
import time

import aiohttp
import psutil

from agentx.capture.answers import Answer
from agentx.capture.recordings import read_rows
from agentx.engine.launch import agentx_server, sim_server
from tests.realengine.llamacpp import free_port

STREAMS = 256
TOKENS = 100


def proxy(upstream: str, store):
    return agentx_server("capture", "proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store", str(store))


def _body(i: int, model: str) -> tuple[str, dict]:
    text = f"request {i} " + "lorem ipsum " * (20 + i % 50)
    if i % 2:
        return "/v1/messages", {"model": model, "max_tokens": TOKENS, "ignore_eos": True, "stream": True,
                                "messages": [{"role": "user", "content": text}]}
    return "/v1/chat/completions", {"model": model, "max_tokens": TOKENS, "ignore_eos": True, "stream": True,
                                    "stream_options": {"include_usage": True},
                                    "messages": [{"role": "user", "content": text}]}


async def _stream_all(url: str, model: str) -> dict[str, bytes]:
    received = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def one(i):
            path, body = _body(i, model)
            async with http.post(url + path, json=body, headers={"X-Request-Id": f"r{i}"}) as resp:
                assert resp.status == 200
                received[f"r{i}"] = b"".join([chunk async for chunk in resp.content.iter_any()])

        await asyncio.gather(*(one(i) for i in range(STREAMS)))
    return received


def test_256_concurrent_streams_lose_no_recording_and_no_byte(sim, model, tmp_path):
    store = tmp_path / "load.db"
    with proxy(sim, store) as url:
        received = asyncio.run(_stream_all(url, model))
    rows = {r.request_id: r for r in read_rows(store)}
    assert len(rows) == STREAMS == len(received)
    for rid, data in received.items():
        row = rows[rid]
        assert row.status == 200 and row.error is None and row.stream
        assert row.response_bytes == len(data) and row.response_sha256 == hashlib.sha256(data).hexdigest()
        answer = Answer.from_json(row.response)
        assert answer.complete and answer.output_tokens == TOKENS
        assert row.start <= row.first_byte <= row.first_token <= row.end
        assert len(answer.text.split()) == TOKENS  # the sim's tokens are one word each


def test_passthrough_of_other_paths_is_not_recorded(sim, tmp_path):
    store = tmp_path / "other.db"

    async def get(url):
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/v1/models") as resp:
                return resp.status, await resp.read()

    with proxy(sim, store) as url:
        via_proxy = asyncio.run(get(url))
    direct = asyncio.run(get(sim))
    assert via_proxy[0] == 200 and json.loads(via_proxy[1])["data"][0]["id"] == json.loads(direct[1])["data"][0]["id"]
    assert list(read_rows(store)) == []


def test_unreachable_upstream_is_answered_and_recorded(tmp_path):
    store = tmp_path / "down.db"

    async def post(url):
        async with aiohttp.ClientSession() as http:
            async with http.post(url + "/v1/chat/completions", json={"messages": []}) as resp:
                return resp.status, await resp.json()

    with proxy(f"http://127.0.0.1:{free_port()}", store) as url:
        status, body = asyncio.run(post(url))
    assert status == 502 and "unreachable" in body["error"]["message"]
    (row,) = read_rows(store)
    assert row.error == "upstream_unreachable" and row.status is None and row.end >= row.start


async def _faulty_requests(url: str, model: str, n: int) -> list[str]:
    seen = []
    async with aiohttp.ClientSession() as http:
        for i in range(n):
            _, body = _body(0, model)
            try:
                async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Request-Id": f"f{i}"}) as resp:
                    await resp.read()
                    seen.append(str(resp.status))
            except aiohttp.ClientPayloadError:
                seen.append("cut")
    return seen


def test_upstream_errors_pass_through_and_are_recorded(model, tmp_path):
    store = tmp_path / "faults.db"
    faults = ("--fault-rate", "1", "--fault-kinds", "http500,disconnect", "--seed", "2")
    with sim_server("--speed", "100", *faults) as sim, proxy(sim, store) as url:
        seen = asyncio.run(_faulty_requests(url, model, 12))
    rows = {r.request_id: r for r in read_rows(store)}
    assert set(seen) == {"500", "cut"}
    for i, what in enumerate(seen):
        row = rows[f"f{i}"]
        if what == "500":
            assert row.status == 500 and row.error is None and not Answer.from_json(row.response).complete
        else:
            assert row.status == 200 and row.error == "upstream_disconnected"


def test_client_that_leaves_mid_stream_is_recorded(model, tmp_path):
    store = tmp_path / "left.db"

    async def leave(url):
        async with aiohttp.ClientSession() as http:
            _, body = _body(0, model)
            body["max_tokens"] = 2000
            resp = await http.post(url + "/v1/chat/completions", json=body, headers={"X-Request-Id": "gone"})
            await resp.content.readany()
            resp.close()  # drop the connection after the first bytes
        await _until(lambda: any(r.end is not None for r in read_rows(store)))  # the proxy saw it go

    with sim_server("--speed", "1") as slow, proxy(slow, store) as url:
        asyncio.run(leave(url))
    (row,) = read_rows(store)
    assert row.error == "client_disconnected" and row.end is not None


def test_sigkill_loses_nothing_already_answered(model, tmp_path):
    store = tmp_path / "killed.db"

    async def answered_then_in_flight(url):
        async with aiohttp.ClientSession() as http:
            for i in range(5):
                _, body = _body(i, model)
                async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Request-Id": f"a{i}"}) as r:
                    await r.read()
            _, body = _body(9, model)
            body["max_tokens"] = 5000
            resp = await http.post(url + "/v1/chat/completions", json=body, headers={"X-Request-Id": "flying"})
            await resp.content.readany()
            proc = proxy_process(url)
            proc.send_signal(signal.SIGKILL)
            await _until(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE)

    with sim_server("--speed", "5") as slow, proxy(slow, store) as url:
        asyncio.run(answered_then_in_flight(url))
    rows = {r.request_id: r for r in read_rows(store)}
    assert all(rows[f"a{i}"].status == 200 and Answer.from_json(rows[f"a{i}"].response).complete for i in range(5))
    assert rows["flying"].status is None and rows["flying"].end is None  # begun, never answered


def proxy_process(url: str) -> psutil.Process:
    port = int(url.rsplit(":", 1)[1])
    return next(p for p in psutil.Process().children() if "capture" in p.cmdline() and
                any(c.laddr.port == port for c in p.net_connections(kind="tcp") if c.status == "LISTEN"))


async def _until(condition, timeout_s: float = 30.0) -> None:
    """Poll `condition` until it holds (instead of sleeping a fixed time and hoping)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        await asyncio.sleep(0.02)

