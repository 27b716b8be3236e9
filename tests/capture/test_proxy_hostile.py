"""Hostile HTTP against the capture proxy in front of the simulated engine (real processes): no
5xx, every error a JSON body, nothing recorded for requests whose body never arrived whole, no
secret in the store, and the proxy up and relaying after all of it."""

import asyncio
import json

from agentx.capture.proxy import api_of
from agentx.capture.recordings import read_rows
from agentx.engine.launch import agentx_server
from tests.hostile_http import (SECRET, byte_cases, concurrent_streams, disconnect_mid_stream, open_half_sent,
                                read_response, send_all, short_body, split_response, wrong_type_cases)

TIMEOUT_S = 2.0  # the proxy's --request-timeout-s in this test
SECRET_HEADERS = {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET, "Cookie": f"session={SECRET}"}


def test_hostile_requests_through_the_proxy(sim, model, tmp_path):
    store, log = tmp_path / "hostile.db", tmp_path / "proxy.log"
    cases = byte_cases(model) + wrong_type_cases(model)
    cases += [("/v1/completions", json.dumps({"model": model, "prompt": "x", "max_tokens": 2,
                                               "api_key": SECRET, "metadata": {"client_secret": SECRET}}).encode()),
              ("/v1/completions", b'{"prompt": "x", "api_key": "' + SECRET.encode() + b'", "max_tokens": ')]
    cases += [("/v1/messages", json.dumps({"metadata": v, "prompt_cache_key": v, "max_tokens": 2}).encode())
              for v in (5, "x", [1], {"user_id": [2]})]  # where the proxy looks for session ids
    with agentx_server("capture", "proxy", "--upstream", sim, "--listen", "127.0.0.1:0", "--store", str(store),
                       "--request-timeout-s", str(TIMEOUT_S), log_path=log) as url:
        statuses = asyncio.run(send_all(url, cases, SECRET_HEADERS))
        assert statuses.count(200) >= 10 and statuses.count(400) >= 100 and 404 in statuses

        answer = short_body(url)
        if answer:
            status, _ = split_response(answer)
            assert status == 400

        half_sent = open_half_sent(url)
        assert asyncio.run(concurrent_streams(url, model)) == 200
        for name, sock in half_sent:
            data, waited = read_response(sock, 10 * TIMEOUT_S)
            sock.close()
            assert waited < 2 * TIMEOUT_S + 1, (name, waited)
            if name == "body never comes":
                status, body = split_response(data)
                assert status == 408 and json.loads(body)["error"]["code"] == 408

        for _ in range(2):
            disconnect_mid_stream(url, model)
        assert asyncio.run(concurrent_streams(url, model, 4)) == 4  # still relaying

    rows = list(read_rows(store))
    recorded = sum(1 for path, _ in cases if api_of("POST", path)) + 200 + 2 + 4
    assert len(rows) == recorded  # every whole request, and no row for the short and half-sent bodies
    for f in tmp_path.glob("hostile.db*"):  # the store and its WAL
        assert SECRET.encode() not in f.read_bytes(), f
    text = log.read_text()
    assert "Traceback" not in text, text
