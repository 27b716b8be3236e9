"""Request limits bound reading a request, never writing its answer (issue #46): a long answer
(60 s modeled) completes over `Connection: close` (urllib's way) and over HTTP/1.0 on the three
servers, each started with a request timeout far shorter than the answer takes: the simulated
engine, the capture proxy in front of it, and `agentx serve`'s uvicorn protocol."""

import asyncio
import json
import socket
import threading
import time
import urllib.request

import pytest

from agentx.engine.launch import agentx_server, sim_server
from agentx.results.httpserver import timed_protocol

TIMEOUT_S = 1.0  # each server's request timeout here
SPEED = 20  # 60 modeled seconds in about 3 wall seconds
TOKENS = 14_000  # about 60 s of decode at one lane (the sim's default deployment)


def _body(model: str, stream: bool) -> bytes:
    return json.dumps({"model": model, "prompt": "hi " * 50, "max_tokens": TOKENS, "ignore_eos": True,
                       "stream": stream}).encode()


def _urllib(url: str, body: bytes) -> bytes:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.status == 200
        return resp.read()


def http10(url: str, body: bytes) -> bytes:
    """POST `body` as an HTTP/1.0 client (no keep-alive): the answer's body, read to the close."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1]
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(f"POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"200", head
    return rest


def _modeled_e2el(answer: bytes, stream: bool) -> float:
    if stream:
        last = [line for line in answer.split(b"\n\n") if line.startswith(b"data: {")][-1]
        return json.loads(last[6:])["agentx_sim"]["e2el_s"]
    return json.loads(answer)["agentx_sim"]["e2el_s"]


@pytest.fixture(scope="module")
def sim_and_proxy(tmp_path_factory):
    store = tmp_path_factory.mktemp("capture") / "store.db"
    with sim_server("--speed", str(SPEED), "--request-timeout-s", str(TIMEOUT_S)) as sim:
        with urllib.request.urlopen(sim + "/v1/models") as resp:
            model = json.load(resp)["data"][0]["id"]
        with agentx_server("capture", "proxy", "--upstream", sim, "--store", str(store), "--listen", "127.0.0.1:0",
                           "--request-timeout-s", str(TIMEOUT_S)) as proxy:
            yield {"sim": sim, "proxy": proxy}, model


@pytest.mark.parametrize("server", ["sim", "proxy"])
@pytest.mark.parametrize("client", [_urllib, http10], ids=["connection-close", "http10"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_long_answer_completes_past_the_request_timeout(sim_and_proxy, server, client, stream):
    urls, model = sim_and_proxy
    answer = client(urls[server] + "/v1/completions", _body(model, stream))
    assert _modeled_e2el(answer, stream) >= 60  # the modeled answer is long: ...
    assert (answer.rstrip().endswith(b"data: [DONE]") if stream else  # ... and it came whole
            json.loads(answer)["usage"]["completion_tokens"] == TOKENS)


async def _slow_app(scope, receive, send):
    """An ASGI app whose answer streams for 4 x TIMEOUT_S (the results API computing a big page)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    for i in range(8):
        await asyncio.sleep(TIMEOUT_S / 2)  # a route handler computing on its thread
        await send({"type": "http.response.body", "body": b"part %d\n" % i, "more_body": i < 7})


@pytest.fixture(scope="module")
def uvicorn_url():
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(_slow_app, log_level="warning", http=timed_protocol(TIMEOUT_S), lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/slow"
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("client", [_urllib, http10], ids=["connection-close", "http10"])
def test_the_results_servers_protocol_writes_a_long_answer_whole(uvicorn_url, client):
    assert client(uvicorn_url, b"{}") == b"".join(b"part %d\n" % i for i in range(8))
