"""Per-client connection limits of `agentx serve` (issue #46): 1,100 half-open connections from
one address used to take every one of uvicorn's 1,000 slots, and every other client got a
plain-text 503; now one address holds at most 256, the rest of its connections get a JSON 503 and
are closed, and another client is answered."""

import http.client
import socket
import time

from agentx.results.db import connect
from tests.results.conftest import agentx_serve


def test_half_open_connections_from_one_client_do_not_lock_out_another(tmp_path):
    db = tmp_path / "r.db"
    connect(f"sqlite:///{db}")
    with agentx_serve(str(db), "--request-timeout-s", "60") as (url, port, _):
        held = []
        try:
            for _ in range(1100):  # a request head never finished
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                s.sendall(b"GET /api/v1/points HTTP/1.1\r\nHost: x\r\n")
                held.append(s)
            time.sleep(1)
            refused = []
            for s in held[-10:]:  # beyond the first 256: answered 503 at once and closed
                s.settimeout(10)
                refused.append(s.recv(4096))
            assert all(r.startswith(b"HTTP/1.1 503 ") and b"too many connections from this address" in r
                       for r in refused), refused[:1]
            other = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
            other.request("GET", "/api/v1/points")
            resp = other.getresponse()
            assert resp.status == 200 and resp.read() == b"[]"
            other.close()
        finally:
            for s in held:
                s.close()
