"""Smaller shapes of the results server (issue #46): the trailing-slash redirect's Location is
relative (never the Host header), a dataset's conversations come a page at a time (API and page)."""

import http.client
import json
import urllib.request

from agentx.results.db import connect
from agentx.results.importer import import_paths
from tests.results.conftest import agentx_serve


def _get(url: str, path: str, host: str):
    """GET with a Host header of the client's choosing (a real socket, no redirect followed)."""
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location"), resp.read()
    finally:
        conn.close()


def test_trailing_slash_redirect_is_relative_and_conversations_paginate(sweep_dir, tmp_path):
    db = tmp_path / "r.db"
    import_paths(connect(f"sqlite:///{db}"), [sweep_dir])
    with agentx_serve(str(db)) as (url, _, _):
        for path, location in (("/api/v1/points/", "/api/v1/points"), ("/points/1/?x=1", "/points/1?x=1"),
                               ("/api/v1/datasets///", "/api/v1/datasets")):
            status, got, _ = _get(url, path, "evil.example:666")
            assert (status, got) == (307, location), (path, status, got)
        with urllib.request.urlopen(url + "/api/v1/points/") as resp:  # urllib follows it to the same server
            assert resp.status == 200 and len(json.load(resp)) == 2
        assert _get(url, "//evil.example/", "x")[1] is None  # no protocol-relative Location
        with urllib.request.urlopen(url + "/api/v1/datasets") as resp:
            (dataset,) = json.load(resp)
        base = f"{url}/api/v1/datasets/{dataset['id']}/conversations"
        with urllib.request.urlopen(base) as resp:
            every = json.load(resp)
        assert len(every) == dataset["conversations"] > 3
        pages = []
        for offset in range(0, len(every), 2):
            with urllib.request.urlopen(f"{base}?limit=2&offset={offset}") as resp:
                pages += json.load(resp)
        assert pages == every
        status, _, body = _get(url, f"/api/v1/datasets/{dataset['id']}/conversations?limit=100000", "x")
        assert status == 422, body
        with urllib.request.urlopen(f"{url}/datasets/{dataset['id']}?offset=1") as resp:
            page = resp.read().decode()
        assert f"Conversations 2-{len(every)} of {len(every)}" in page and "previous conversations" in page
        assert f'/conversations/{every[0]["id"]}"' not in page and f'/conversations/{every[1]["id"]}"' in page
