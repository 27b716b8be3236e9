"""No page or API route of `agentx serve` answers 5xx, over a database holding every kind of corpus
a user stores: the bundled traces (the report sweep), a synthetic corpus (`agentx trace synth`),
a fixed-length scenario (InferenceX's 1k1k) and an imported AIPerf run. Each route is asked with
every id it takes as a browser (Accept: text/html) and as an API client; a browser's error is an
HTML page, an API client's is JSON."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentx.report.dataset import digest_charts
from agentx.report.figures import log_bars
from agentx.traces.digest import log_histogram
from tests.results.conftest import agentx_serve

AIPERF = Path(__file__).parents[1] / "results" / "data" / "aiperf"
CLI = [sys.executable, "-m", "agentx.cli"]
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _run(*args: str) -> None:
    res = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def corpora(sweep, tmp_path_factory):
    """`agentx serve --read-only` on a database of the four corpus kinds; its URL."""
    root = tmp_path_factory.mktemp("corpora")
    _run("trace", "synth", "--out", str(root / "synth"), "--sessions", "6")
    _run("sim", "bench", "--traces", str(root / "synth"), "--concurrency", "4", "--duration", "300",
         "--out", str(root / "synthetic"))
    _run("sim", "bench", "--scenario", "1k1k", "--concurrency", "2", "--duration", "60", "--out", str(root / "scenario"))
    db = str(root / "results.db")
    _run("db", "import", str(sweep), str(root / "synthetic"), str(root / "scenario"), "--db", db)
    _run("db", "import-aiperf", str(AIPERF), "--hardware", "H200", "--gpus", "8", "--engine", "vllm", "--db", db)
    with agentx_serve(db, "--read-only") as (url, _, _):
        yield url


def _get(url: str, headers: dict | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def _paths(url: str) -> list[str]:
    """Every route with each id it takes (and ids that exist nowhere)."""
    api = json.loads(_get(url + "/api/v1/points?limit=10000")[2])
    sets = json.loads(_get(url + "/api/v1/datasets")[2])
    convs = [c["id"] for d in sets for c in json.loads(_get(f"{url}/api/v1/datasets/{d['id']}/conversations")[2])]
    ids = [p["id"] for p in api] + [999]
    assert {p["source"] for p in api} >= {"agentx", "aiperf"} and len(sets) >= 3, (api, sets)
    out = ["/", "/?x=p90_ttft&y=joules_per_output_token&logx=1&logy=1", "/?at=5", "/?kind=plan", "/docs",
           "/compare", "/compare?points=" + ",".join(map(str, ids[:4])), f"/compare?points={ids[0]},999",
           "/api/v1/frontier", "/api/v1/frontier?overall=true", "/api/v1/frontier/interpolate?at=5",
           "/api/v1/deployments", "/api/v1/sweeps", "/api/v1/datasets", "/openapi.json", "/favicon.ico"]
    for i in ids:
        out += [f"/points/{i}", f"/points/{i}/info", f"/points/{i}/parts/timeline", f"/points/{i}/parts/timeline_lane",
                f"/points/{i}/parts/flames", f"/points/{i}/flames/0", f"/points/{i}/flames/7",
                *(f"/api/v1/points/{i}{tail}" for tail in ("", "/result.json", "/series", "/histograms", "/timeline",
                                                           "/timeline?by=lane", "/inferencex"))]
    for d in [s["id"] for s in sets] + [999]:
        out += [f"/datasets/{d}", f"/api/v1/datasets/{d}/conversations"]
    for c in convs + [99999]:
        out += [f"/conversations/{c}", f"/api/v1/conversations/{c}"]
    return out


def test_no_route_answers_5xx_on_any_corpus(corpora):
    paths = _paths(corpora)
    seen = {}
    for path in paths:
        for who, headers in (("browser", BROWSER), ("api", {})):
            status, kind, body = _get(corpora + path, headers)
            assert status < 500, (who, path, status, body[:300])
            seen[(who, path)] = status
            if status >= 400:  # an error: a page for a browser on a page route, JSON for the API
                page = who == "browser" and not path.startswith("/api/")
                assert kind.startswith("text/html" if page else "application/json"), (who, path, kind)
                if page:
                    assert b"<h1>" in body and b'href="/"' in body, path
    assert seen[("browser", "/points/999")] == seen[("api", "/points/999")] == 404
    assert seen[("browser", "/datasets/999")] == 404
    assert sum(1 for (_, p), s in seen.items() if p.startswith("/datasets/") and s == 200) >= 6  # both, each set


def test_browser_errors_are_html_pages(corpora):
    """/compare?points=3,999 in a browser: a page saying which point is missing (JSON to curl)."""
    status, kind, body = _get(corpora + "/compare?points=1,999", BROWSER)
    assert status == 404 and kind.startswith("text/html") and b"point 999 not found" in body
    status, kind, body = _get(corpora + "/compare?points=1,999")
    assert status == 404 and json.loads(body) == {"detail": "point 999 not found"}
    status, kind, body = _get(corpora + "/points/abc", BROWSER)
    assert status == 422 and kind.startswith("text/html") and b"point_id" in body


def test_gap_histogram_of_sub_millisecond_gaps():
    """Gaps of microseconds (a synthetic corpus's zero-think turns) keep their edges, and a digest
    stored with edges rounded to 0 (before) draws its positive bins instead of raising on log10(0)."""
    h = log_histogram([2e-6, 3e-6, 4e-5])
    assert h is not None and min(h["edges"]) > 0
    bars, axis = log_bars(h["edges"], h["counts"], "gaps")
    assert sum(bars["y"]) == 3 and axis["tickvals"]
    old = {"edges": [0.0] * 41, "counts": [1] + [0] * 39, "n": 1, "zeros": 0}
    per = {"id": ["s"], "hit_tokens": [1], "isl_tokens": [2], "requests": [3], "subagents": [0]}
    charts = digest_charts({"sessions": per, "isl": None, "osl": None, "gap_s": old})
    assert "all under 0.0001" in charts["gaps"]["layout"]["annotations"][0]["text"]
