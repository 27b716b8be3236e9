"""Hostile HTTP against the simulated engine (a real server process): no 5xx, every error a JSON
body in the API's shape, half-sent requests closed within the server's request timeout, a
client that hangs up one log line, and the server healthy after all of it."""

import asyncio
import json
import time
import urllib.request

from agentx.engine.launch import sim_server
from tests.hostile_http import (byte_cases, check_answer, concurrent_streams, disconnect_mid_stream,
                                open_half_sent, read_response, send_all, short_body, split_response,
                                wrong_type_cases)

TIMEOUT_S = 2.0  # the server's --request-timeout-s in this test


def _model(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models") as resp:
        return json.load(resp)["data"][0]["id"]


def test_hostile_requests_get_json_errors_and_leave_the_sim_healthy(tmp_path):
    log = tmp_path / "sim.log"
    with sim_server("--speed", "100", "--request-timeout-s", str(TIMEOUT_S), log_path=log) as url:
        model = _model(url)
        statuses = asyncio.run(send_all(url, byte_cases(model) + wrong_type_cases(model)))
        assert statuses.count(200) >= 10 and statuses.count(400) >= 100 and 404 in statuses and 405 not in statuses

        answer = short_body(url)  # the client half-closed: aiohttp drops the request, or it is a 400
        if answer:
            status, body = split_response(answer)
            check_answer(status, body, "/v1/completions")
            assert status == 400

        half_sent = open_half_sent(url)
        assert asyncio.run(concurrent_streams(url, model)) == 200  # while the half-sent ones hang
        for name, sock in half_sent:
            data, waited = read_response(sock, 10 * TIMEOUT_S)
            sock.close()
            assert waited < 2 * TIMEOUT_S + 1, (name, waited)  # closed by the server, in time
            if name == "body never comes":
                status, body = split_response(data)
                assert status == 408 and json.loads(body)["error"]["code"] == 408

        for _ in range(3):
            disconnect_mid_stream(url, model)
        time.sleep(0.5)
        assert asyncio.run(concurrent_streams(url, model, 4)) == 4  # healthy after
        with urllib.request.urlopen(url + "/health") as resp:
            assert resp.status == 200
    text = log.read_text()
    assert "Traceback" not in text, text
    assert text.count("client went away") == 3, text
    assert text.count("body not received within") == 1, text
