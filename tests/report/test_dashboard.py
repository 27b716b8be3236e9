"""The dashboard's answer layer, compare page, filters and axes, and its looks (dark, 390 px, /docs
offline), in headless Chromium against `agentx serve` on a database of real sim runs: the report
sweep (8 GPUs at c2 and c6) and the two-replica run (16 GPUs at c8), one curve of two
configurations. Screenshots go to tmp_path."""

import gzip
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from agentx.report.frontier_chart import X_LABELS, Y_LABELS
from agentx.results import frontier as fr
from tests.report.browser import chromium_page, looks_wrong
from tests.results.conftest import agentx_serve


@pytest.fixture(scope="module")
def served(sweep, replica_run, tmp_path_factory):
    db = str(tmp_path_factory.mktemp("answers") / "results.db")
    cli = [sys.executable, "-m", "agentx.cli"]
    subprocess.run([*cli, "db", "import", str(sweep), str(replica_run), "--db", db], check=True, capture_output=True)
    with agentx_serve(db, "--read-only") as (url, _, _):
        yield url


def api(url: str, path: str, **params):
    query = "?" + urllib.parse.urlencode(params) if params else ""
    return json.loads(urllib.request.urlopen(url + "/api/v1" + path + query, timeout=10).read())


def test_answer_layer_and_compare(served, tmp_path):
    """ "Best tok/s per GPU at x, with which configuration": the page's table and chart say what
    GET /frontier/interpolate answers; two points picked in the table open a shareable compare page."""
    pts = sorted(api(served, "/points", status="ok"), key=lambda p: p["id"])
    eight = sorted((p for p in pts if p["gpus"] == 8), key=lambda p: p["concurrency"])
    at = round((eight[0]["p90_e2e_norm_intvty"] + eight[1]["p90_e2e_norm_intvty"]) / 2, 2)
    # these short runs are low-confidence (SPEC 3, "Settled: confidence"): by default no answer at all
    assert [c["value"] for c in api(served, "/frontier/interpolate", at=at)["curves"]] == [None, None]
    expected = api(served, "/frontier/interpolate", at=at, spread_limit=0)  # no bound: the answer layer's mechanics
    with chromium_page(allow=served) as page:
        page.page.goto(f"{served}/?at={at}&spread_limit=0")
        page.page.wait_for_selector("#answer:not([hidden])")
        page.page.wait_for_function("document.getElementById('frontier').data.some(t => t.meta === 'answer')")
        cells = [r.split("\t") for r in page.page.locator("#answer-table tr").all_inner_texts()[1:]]
        assert len(cells) == len(expected["curves"])
        for row, curve in zip(cells, expected["curves"]):
            assert row[0] == ", ".join(str(curve["key"][k]) for k in ("hardware", "engine", "model", "workload"))
            if curve["value"] is None:
                assert row[1] == "no point reaches it"
                continue
            assert row[3] == page.page.evaluate("v => AX.fmt(v)", curve["value"])
            for key, cell in (("configuration", 1), ("point_ids", 5)):
                if key in curve:  # the configuration and points that give it (the trust issue's answer)
                    assert row[cell] == (curve[key] if key == "configuration" else ", ".join(map(str, curve[key])))
        stars = page.page.evaluate("document.getElementById('frontier').data.find(t => t.meta === 'answer').y")
        assert stars == [c["value"] for c in expected["curves"] if c["value"] is not None]
        line = page.page.evaluate("document.getElementById('frontier').layout.shapes.find(s => s.name === 'target')")
        assert line["x0"] == line["x1"] == at
        assert f"at={at}" in page.page.url and "spread_limit=0" in page.page.url
        page.page.screenshot(path=tmp_path / "answer.png", full_page=True)

        # A vs B: A ticked in the table, B added from its pinned tooltip on the chart, opened by the bar's link
        a, b = eight[0]["id"], next(p["id"] for p in pts if p["gpus"] == 16)
        page.page.check(f"input.pick[data-point='{a}']")
        trace, index = page.page.evaluate("""id => { const data = document.getElementById('frontier')._fullData;
            const i = data.findIndex(t => t.meta !== 'answer' && Array.from(t.customdata).includes(id));
            return [i, Array.from(data[i].customdata).indexOf(id)]; }""", b)
        # B is NOT VALID (host timing), beyond the axes ranged on the valid points: listed under the chart
        assert f"point {b} " in page.page.inner_text("#frontier-outside")
        page.page.evaluate("Plotly.relayout('frontier', {'xaxis.autorange': true, 'yaxis.autorange': true})")
        page.click_point("frontier", trace, index)
        page.page.wait_for_selector("#tip:not([hidden])")
        assert f"{b}" in page.page.inner_text("#tip") and "16 x H200" in page.page.inner_text("#tip")
        page.page.click("#tip button.add")
        assert page.page.is_checked(f"input.pick[data-point='{b}']")
        href = page.page.get_attribute("#compare-go", "href")
        assert href == f"/compare?points={a},{b}"
        with page.page.expect_navigation():
            page.page.click("#compare-go")
        page.page.wait_for_function("document.body.dataset.drawn === 'yes'")
        check_compare(page, served, a, b)
        page.page.screenshot(path=tmp_path / "compare.png", full_page=True)
        assert page.errors == []
    with chromium_page(allow=served) as fresh:  # the URL is the comparison
        fresh.visit(served + href, "document.body.dataset.drawn === 'yes'")
        check_compare(fresh, served, a, b)
        assert fresh.errors == []


def check_compare(page, served: str, a: int, b: int) -> None:
    pa, pb = (api(served, f"/points/{i}") for i in (a, b))
    settings = {r.split("\t")[0]: r for r in page.page.locator("#settings tr").all_inner_texts()}
    assert settings["gpus"].split("\t")[1:] == ["8", "16"]
    differs = page.page.eval_on_selector_all("#settings tr.differs td:first-child", "tds => tds.map(t => t.textContent)")
    assert "gpus" in differs and "concurrency" in differs and "model" not in differs
    rows = {r.split("\t")[0]: r.split("\t")[1:] for r in page.page.locator("#figures tr").all_inner_texts()[1:]}
    va, vb = pa["tput_per_gpu"], pb["tput_per_gpu"]
    fmt = lambda v: page.page.evaluate("v => AX.fmt(v)", v)  # noqa: E731
    assert rows["total tok/s per GPU"] == [fmt(va), fmt(vb), f"{(vb - va) / va:+.1%}"]
    assert rows["TTFT p90 ms"][:2] == [fmt(pa["p90_ttft"] * 1000), fmt(pb["p90_ttft"] * 1000)]
    charts = page.page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(gd =>
        [gd.id, gd.data.map(t => [t.name, Math.min(...t.x), Math.max(...t.x)])])""")
    assert len(charts) >= 5
    for _, traces in charts:
        if traces:
            assert [t[0] for t in traces] == [f"point {a} (c{pa['concurrency']})", f"point {b} (c{pb['concurrency']})"]
            assert all(lo < 0 < hi for _, lo, hi in traces)  # seconds from each profiling start: warmup before 0


def test_every_filter_and_axis(served, tmp_path):
    """Each filter of the form narrows the table to the points the API lists for it, in the URL;
    each x and y choice draws its axis; log axes stay in the URL."""
    with chromium_page(allow=served) as page:
        page.page.goto(served + "/")
        names = page.page.eval_on_selector_all("#filters select", "ss => ss.map(s => s.name)")
        assert {"hardware", "engine", "engine_version", "kind", "dataset", "model"} <= set(names)
        for name in names:
            page.page.goto(served + "/?x=p90_ttft")
            options = page.page.eval_on_selector_all(f"#filters select[name={name}] option", "os => os.map(o => o.value)")
            value = options[1]
            page.page.select_option(f"#filters select[name={name}]", value)
            page.page.click("#filters button")
            page.page.wait_for_url(f"**{urllib.parse.urlencode({name: value})}**")
            assert "x=p90_ttft" in page.page.url
            listed = api(served, "/points", status="ok", **{name: value})
            if listed:
                assert page.page.locator("#sweep-table tr").count() == len(listed) + 1, name
            else:
                assert "No points to show" in page.page.inner_text("#no-points"), name
        for axis, labels in (("x", X_LABELS), ("y", Y_LABELS)):
            for key, label in labels.items():
                page.visit(f"{served}/?{axis}={key}", "document.getElementById('frontier')._fullLayout !== undefined")
                title = page.page.evaluate(f"document.getElementById('frontier').layout.{axis}axis.title.text")
                drawn = page.page.evaluate("document.getElementById('frontier').data.length")
                assert title == label or drawn == 0, (key, title)  # an empty chart says why
        page.visit(served + "/", "document.getElementById('frontier')._fullLayout !== undefined")
        page.page.check("#log-x")
        page.page.wait_for_function("document.getElementById('frontier')._fullLayout.xaxis.type === 'log'")
        assert "logx=1" in page.page.url
        page.page.reload()
        page.page.wait_for_function("document.getElementById('frontier')._fullLayout !== undefined")
        assert page.page.evaluate("document.getElementById('frontier')._fullLayout.xaxis.type") == "log"
        assert page.page.is_checked("#log-x")
        page.page.screenshot(path=tmp_path / "log-x.png", full_page=True)
        assert page.errors == []
    assert set(fr.X_METRICS) == set(X_LABELS)


@pytest.mark.parametrize("dark, width", [(False, 1440), (True, 1440), (False, 390), (True, 390)],
                         ids=["light", "dark", "390px", "dark-390px"])
def test_pages_light_dark_at_1440_and_390_px(served, tmp_path, dark, width):
    """Every page light and dark, at 1,440 px and at a phone's width: no console error, nothing wider
    than the window (wide tables scroll in their box), the charts in the page's colours, no
    low-contrast control, overprint, cut legend or title (LOOKS); /docs offline. tools/screenshots.py
    writes these pages' screenshots (docs/screenshots/issue-47)."""
    point, other = (p["id"] for p in api(served, "/points", status="ok")[:2])
    pages = {"frontier": "/", "point": f"/points/{point}", "compare": f"/compare?points={point},{other}",
             "dataset": "/datasets/1", "conversation": "/conversations/1", "docs": "/docs", "error": "/points/999"}
    background = "rgb(20, 23, 29)" if dark else "rgb(255, 255, 255)"
    with chromium_page(width=width, height=844, allow=served, dark=dark) as page:
        for name, path in pages.items():
            if name in ("docs", "error"):
                page.page.goto(served + path)
            else:  # a page draws a chart as it comes near the viewport: every chart scrolled to and drawn
                page.visit(served + path, charts=0)
                paper = page.page.evaluate("document.querySelector('.js-plotly-plot')._fullLayout.paper_bgcolor")
                assert paper.replace(" ", "") in (background.replace(" ", ""), "#14171d" if dark else "#ffffff")
            if name == "docs":
                page.page.wait_for_selector(".swagger-ui .info .title")
                assert "agentx results" in page.page.inner_text(".swagger-ui .info .title")
            elif name == "error":  # a browser's 404 (the last page): a page of the dashboard's, not JSON
                assert page.page.inner_text("h1") == "404: not found"
                assert page.errors == [] or page.errors[-1].endswith("404 (Not Found)")
                page.errors = page.errors[:-1]
            assert page.page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == background
            assert page.page.evaluate("document.documentElement.scrollWidth") <= width, name
            assert looks_wrong(page) == [], name
            if name == "frontier":  # the plot at least half the window tall, its legend entries short
                plot = page.page.evaluate("document.getElementById('frontier')._fullLayout._size.h")
                assert plot >= 844 / 2
                names = page.page.evaluate("document.getElementById('frontier')._fullData.map(t => t.name)")
                assert max(map(len, names)) <= 32 + len(": off the frontier"), names
            assert page.page.get_attribute("header.top a[href='/docs']", "href") == "/docs"
            page.page.screenshot(path=tmp_path / f"{name}.png", full_page=True)
        assert page.errors == []
    with urllib.request.urlopen(served + "/favicon.ico", timeout=5) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("image/svg+xml")


def test_compare_filters_and_docs_bounds(served):
    """Compare takes one to four existing point ids (422 otherwise, 404 for a missing one); the kind
    filter splits measured, simulated and plan points; /docs names no URL off the server."""
    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(served + path, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert [status(p) for p in ("/compare?points=abc", "/compare?points=1,2,3,4,5", "/compare?points=999",
                                "/compare", "/?kind=bogus", "/api/v1/points?kind=bogus")] == [422, 422, 404, 200, 422, 422]
    ok = api(served, "/points", status="ok")
    assert api(served, "/points", kind="measured") == []  # every point here is the sim's
    assert len(api(served, "/points", kind="simulated", status="ok")) == len(ok) == 3
    assert api(served, "/points", kind="plan") == []
    assert api(served, "/points", precision="no-such") == []
    docs = urllib.request.urlopen(served + "/docs", timeout=10).read().decode()
    assert "http://" not in docs and "https://" not in docs.replace("https://www.w3.org", "")
    for name in ("swagger-ui-bundle.js", "swagger-ui.css"):
        for encoding in ("identity", "gzip"):
            req = urllib.request.Request(f"{served}/static/swagger-ui/{name}", headers={"Accept-Encoding": encoding})
            with urllib.request.urlopen(req, timeout=10) as r:
                body = r.read()
                assert r.headers.get("Content-Encoding", "identity") == encoding
                text = gzip.decompress(body) if encoding == "gzip" else body
                assert len(text) > (1_000_000 if name.endswith(".js") else 100_000) and b"swagger" in text.lower()


def test_the_pinned_tooltip_is_asked_for_not_embedded(served):
    """The frontier page embeds no point's tooltip figures (1 kB a point: 1 MB of a 1,000-point
    page, benchmarks/dashboard.py); a click asks /points/ID/info, which says what the API does."""
    html = urllib.request.urlopen(served + "/", timeout=10).read().decode()
    data = json.loads(html.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert data["info"] == {} and data["info_url"] == "/points/"
    for p in api(served, "/points", status="ok"):
        info = json.loads(urllib.request.urlopen(f"{served}/points/{p['id']}/info", timeout=10).read())
        assert info["concurrency"] == p["concurrency"] and info["valid"] == p["valid"]
        assert info["figures"]["tput_per_gpu"] == pytest.approx(p["tput_per_gpu"])
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(served + "/points/99999/info", timeout=10)
    assert missing.value.code == 404
