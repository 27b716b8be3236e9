"""The dashboard served by `agentx serve` on a database holding a real sweep on the sim, opened in
headless Chromium: the frontier draws the stored points, a click opens the point's page, every
chart there has data, its siblings are linked, a filter with no match says so, no console error."""

import gzip
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from agentx.report.toolkit import FULL, plotly_digest, plotly_js
from tests.report.browser import POINT_GRAPHS, assert_every_graph_has_points, chromium_page
from tests.conftest import WEKA

FRONTIERS = {"frontier"}


def test_frontier_page_to_point_page(dashboard, tmp_path):
    with chromium_page(allow=dashboard) as page:
        page.visit(dashboard + "/", "document.querySelectorAll('.js-plotly-plot').length >= 1")
        assert_every_graph_has_points(page, FRONTIERS)
        assert page.page.locator("#sweep-table tr").count() == 3  # header + c2 + c6
        page.page.screenshot(path=tmp_path / "frontier.png", full_page=True)

        # another view: the page is asked again with x and y in its URL
        page.page.select_option("#frontier-x", "p90_ttft")
        page.page.wait_for_url("**/?*x=p90_ttft*")
        page.page.wait_for_function("document.getElementById('frontier') && document.getElementById('frontier')"
                                    ".layout.xaxis.title.text === 'p90 TTFT s'")
        assert "y=tput_per_gpu" in page.page.url
        assert_every_graph_has_points(page, FRONTIERS)
        # the measured-power views: J per output token (lower is better) and measured tok/s per MW
        for y, title in (("joules_per_output_token", "J per output token (measured, lower is better)"),
                         ("measured_tok_s_per_mw", "total tok/s per MW (measured power)")):
            page.page.select_option("#frontier-y", y)
            page.page.wait_for_url(f"**/?*y={y}*")
            page.page.wait_for_function("document.getElementById('frontier') && document.getElementById('frontier')"
                                        f".layout.yaxis.title.text === '{title}'")
            assert_every_graph_has_points(page, FRONTIERS)
        page.page.select_option("#frontier-y", "tput_per_gpu")
        page.page.wait_for_url("**/?*y=tput_per_gpu*")
        # the filter form keeps the view and puts the filter in the URL
        page.page.select_option("#filters select[name=hardware]", "H200")
        page.page.click("#filters button")
        page.page.wait_for_url("**hardware=H200**")
        assert "x=p90_ttft" in page.page.url
        page.page.wait_for_function("document.getElementById('frontier')._fullData !== undefined")
        assert page.page.locator("#sweep-table tr").count() == 3

        page.visit(dashboard + "/", "document.getElementById('frontier')._fullData !== undefined")
        fig = page.page.evaluate("""() => document.getElementById('frontier')._fullData
            .map((t, i) => [i, t.visible, t.customdata, t.text])""")
        # a label is the concurrency, then the parallelism where set ("c6 TP8")
        trace, ids, labels = next((i, cd, [t.split()[0] for t in text]) for i, visible, cd, text in fig
                                  if visible is True and any(t.split()[0] == "c6" for t in text))
        point_id = ids[labels.index("c6")]
        page.click_point("frontier", trace, labels.index("c6"))  # pins the point's figures, with a link to it
        page.page.wait_for_selector("#tip:not([hidden])")
        page.page.click("#tip a.open")
        page.page.wait_for_url(f"{dashboard}/points/{point_id}")
        page.draw_all(12)
        assert_every_graph_has_points(page, POINT_GRAPHS)

        # a timeline bar opens its conversation's flamegraph (fetched from the server) at that turn
        trace, custom = page.page.evaluate("""() => { const data = document.getElementById('fig-timeline')._fullData;
            const i = data.findIndex(t => t.name === 'request'); return [i, data[i].customdata.map(r => Array.from(r))]; }""")
        shown = page.page.evaluate("document.getElementById('flame').layout.meta.tree")
        j = next(j for j, cd in enumerate(custom) if cd[0] != shown)
        tree, node = custom[j][:2]
        page.click_point("fig-timeline", trace, j)
        page.page.wait_for_function(f"document.getElementById('flame').layout.meta.tree === {tree}")
        nodes = page.page.evaluate("document.getElementById('flame').layout.meta.nodes")
        highlight = page.page.evaluate("document.getElementById('flame').layout.shapes.slice(-1)[0]")
        assert highlight["y0"] == pytest.approx(nodes.index(node) - 0.5)
        assert "c6" in page.page.inner_text("h1")
        links = page.page.eval_on_selector_all("#related a", "as => as.map(a => a.getAttribute('href'))")
        assert links[0] == "/" and len(links) == 2  # the frontier and the c2 sibling
        page.page.screenshot(path=tmp_path / "point.png", full_page=True)

        with page.page.expect_navigation():
            page.page.click("#related a:nth-child(2)")
        page.draw_all(12)
        assert "c2" in page.page.inner_text("h1")
        assert page.errors == []


def test_filters_and_missing_points(dashboard):
    with chromium_page(allow=dashboard) as page:
        page.page.goto(dashboard + "/?model=no-such-model")
        assert "No points to show" in page.page.inner_text("#no-points")
        assert page.graphs() == []
        assert page.errors == []
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(dashboard + "/points/999", timeout=5)
    assert e.value.code == 404


def assert_stats_equal_the_cli(page) -> None:
    """Every cell and caption line of the page's trace statistics is what `agentx trace stats` prints
    for the traces the runs replayed (the bundled WEKA sessions)."""
    env = {**os.environ, "COLUMNS": "250"}
    cli = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", str(WEKA)], capture_output=True,
                         text=True, timeout=120, check=True, env=env).stdout
    printed = [line.split() for line in cli.splitlines()]
    rows = page.locator("#stats tr").all_inner_texts()
    assert rows[0].split() == ["metric", "n", "mean", "p50", "p90", "p95", "p99", "max", "lognorm", "fit"]
    assert len(rows) == 7 and [r.split()[0] for r in rows[1:]] == ["ISL", "OSL", "turn", "subagents*", "subagent",
                                                                    "session"]
    for row in rows[1:]:
        assert row.split() in printed, row
    caption = page.locator("#stats-caption div").all_inner_texts()
    assert "theoretical prefix-cache hit rate 94.4%" in caption[2]  # the bundled sessions' figure
    for line in caption[:3]:  # the figures (the footnote wraps to the table's width)
        assert line.split() in printed, line


def test_dataset_explorer_to_conversation_flamegraph(dashboard, tmp_path):
    with chromium_page(allow=dashboard) as page:
        page.page.goto(dashboard + "/")
        page.page.click("#related a[href^='/datasets/']")
        page.page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 5")
        assert_every_graph_has_points(page, {"fig-isl", "fig-osl", "fig-gaps", "fig-subagents", "fig-requests",
                                             "fig-hit"})
        assert_stats_equal_the_cli(page.page)
        rows = page.page.locator("#rows tr").count() - 1
        assert rows >= 5  # the conversations the two runs replayed
        runs = [r.split("\t") for r in page.page.locator("#runs tr").all_inner_texts()[1:]]  # every run over it
        points = json.loads(urllib.request.urlopen(dashboard + "/api/v1/points", timeout=10).read())
        assert sorted(r[0] for r in runs) == sorted(f"point {p['id']}" for p in points)
        assert sorted(int(r[2]) for r in runs) == [2, 6]
        header = page.page.locator("#rows tr").first.inner_text().split("\t")
        counts = [int(c) for c in page.page.locator(f"#rows td:nth-child({header.index('runs') + 1})").all_inner_texts()]
        assert set(counts) <= {1, 2} and 2 in counts  # how many of the two runs replayed each conversation
        page.page.screenshot(path=tmp_path / "dataset.png", full_page=True)
        session = page.page.inner_text("#rows tr:nth-child(2) td:first-child")
        # whole conversations: the requests replayed of those the trace has (the stored digest's)
        sets = json.loads(urllib.request.urlopen(dashboard + "/api/v1/datasets", timeout=10).read())
        digest = json.loads(next(d["summary"] for d in sets if d["summary"]))
        total = dict(zip(digest["sessions"]["id"], digest["sessions"]["requests"]))[session]
        replayed = page.page.inner_text("#rows tr:nth-child(2) td:nth-child(2)")
        assert replayed.endswith(f" of {total:,}")
        page.page.click("#rows tr:nth-child(2) a")
        page.page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1")
        assert_every_graph_has_points(page, {"fig-flame"})
        assert session in page.page.inner_text("h1")
        flame = page.page.evaluate("document.getElementById('fig-flame').data.map(t => [t.name, t.y.length])")
        assert all(n == total for _, n in flame)  # a row per request of the trace
        assert f"{replayed.split()[0]} of {total} requests replayed" in page.page.evaluate(
            "document.getElementById('fig-flame').layout.title.text")
        page.page.screenshot(path=tmp_path / "conversation.png", full_page=True)
        assert page.errors == []


def test_plotly_is_served_for_good_and_timelines_on_demand(dashboard):
    """Each page names the smallest plotly.js bundle drawing its charts by a URL holding its hash,
    cached for good (the frontier and the dataset explorer the one without WebGL, a point page the
    full one: its timelines come later); a point page holds its summary and charts over time, and
    its timelines and flamegraph list come from its parts."""
    def script_src(path: str) -> str:
        page = urllib.request.urlopen(dashboard + path, timeout=10).read().decode()
        return page.split('<script src="')[1].split('"')[0]

    point = json.loads(urllib.request.urlopen(dashboard + "/api/v1/points", timeout=10).read())[0]["id"]
    svg, full = (f"/static/plotly-{plotly_digest(b)}.min.js" for b in ("plotly-agentx-svg.min.js", FULL))
    assert script_src("/") == script_src("/datasets/1") == script_src("/conversations/1") == svg != full
    assert script_src(f"/points/{point}") == full
    for bundle, src in (("plotly-agentx-svg.min.js", svg), (FULL, full)):
        for encoding in ("identity", "gzip"):
            with urllib.request.urlopen(urllib.request.Request(dashboard + src, headers={"Accept-Encoding": encoding}),
                                        timeout=10) as r:
                assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
                body = gzip.decompress(r.read()) if encoding == "gzip" else r.read()
                assert r.headers.get("Content-Encoding", "identity") == encoding and body.decode() == plotly_js(bundle)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(dashboard + "/static/plotly-000000000000.min.js", timeout=5)
    assert e.value.code == 404
    page = urllib.request.urlopen(f"{dashboard}/points/{point}", timeout=10).read().decode()
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert data["points"][0]["parts_url"] == f"/points/{point}/parts/"
    assert not {"timeline", "timeline_lane", "flame_trees"} & set(data["points"][0])
    parts = {part: json.loads(urllib.request.urlopen(f"{dashboard}/points/{point}/parts/{part}", timeout=10).read())
             for part in ("timeline", "timeline_lane", "flame_trees")}
    assert "by conversation" in parts["timeline"]["layout"]["title"]["text"]
    assert "by lane" in parts["timeline_lane"]["layout"]["title"]["text"]
    assert parts["flame_trees"] and all(label.startswith(f"tree {t}:") for t, label in parts["flame_trees"])
    for bad in (f"/points/{point}/parts/summary", "/points/999/parts/timeline"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(dashboard + bad, timeout=5)
        assert e.value.code == 404
