"""The HTML report of a real sweep on the sim, opened offline in headless Chromium: every chart
draws data, a frontier point opens its point, a timeline bar opens its conversation's
flamegraph at that turn, and the console stays free of errors. Screenshots go to tmp_path."""

import pytest

from agentx.report.html import LAZY_TYPES, run_view, write_report
from agentx.report.toolkit import BUNDLES, FULL, bundle_for, plotly_js, script_json, trace_types
from agentx.report.rundata import read_run, sweep_folders
from agentx.report.frontier_chart import frontier_chart, frontier_rows
from agentx.report.timeline import request_timeline
from agentx.results import frontier as fr
from agentx.results.importer import chart_blobs
from agentx.report.figures import COLORS
from tests.report.browser import (POINT_GRAPHS, assert_every_graph_has_points, assert_toolbars_clear, chromium_page,
                                  timeline_bars_on_their_rows)


def test_sweep_report_in_chromium(sweep, tmp_path):
    path = write_report(sweep)
    with chromium_page() as page:
        page.visit(path.as_uri(), charts=13)
        frontiers = {"frontier"}
        assert_every_graph_has_points(page, POINT_GRAPHS | frontiers)
        assert page.page.inner_text("#points button.active").startswith("c2")
        page.page.screenshot(path=tmp_path / "sweep.png", full_page=True)

        # a click on the c6 point of the frontier opens that point
        fig = page.page.evaluate("""() => document.getElementById('frontier')._fullData
            .map((t, i) => [i, t.visible, t.customdata])""")
        trace, names = next((i, cd) for i, visible, cd in fig if visible is True and "c6" in cd)
        page.click_point("frontier", trace, names.index("c6"))  # pins its figures, a button shows it below
        page.page.wait_for_selector("#tip:not([hidden])")
        tip = page.page.inner_text("#tip")
        assert "c6" in tip and "p90 TTFT s" in tip and "total tok/s per GPU" in tip
        page.page.locator("#tip").screenshot(path=tmp_path / "tooltip.png")
        page.page.click("#tip button.show")
        page.page.wait_for_function("document.querySelector('#points button.active').textContent.startsWith('c6')")
        page.draw_all(13)  # the c6 charts, drawn as they come into view
        assert page.page.evaluate("location.hash") == "#point=c6"
        page.page.select_option("#frontier-x", "p90_ttft")  # p90 TTFT: redrawn, the view in the URL
        page.page.wait_for_function("document.getElementById('frontier').layout.xaxis.title.text === 'p90 TTFT s'")
        assert page.page.evaluate("location.hash") == "#point=c6&x=p90_ttft&y=tput_per_gpu"
        page.page.select_option("#frontier-y", "tok_s_per_mw")
        page.page.wait_for_function("document.getElementById('frontier').layout.yaxis.title.text"
                                    " === 'total tok/s per MW'")
        assert_every_graph_has_points(page, POINT_GRAPHS | frontiers)
        for y, title in (("joules_per_output_token", "J per output token (measured, lower is better)"),
                         ("measured_tok_s_per_mw", "total tok/s per MW (measured power)")):
            page.page.select_option("#frontier-y", y)  # measured power (bench --power) as the frontier's y
            page.page.wait_for_function(f"document.getElementById('frontier').layout.yaxis.title.text === '{title}'")
            assert_every_graph_has_points(page, POINT_GRAPHS | frontiers)

        # a click on a timeline bar of another conversation opens its flamegraph at that turn
        shown = page.page.evaluate("document.getElementById('flame').layout.meta.tree")
        markers = page.page.evaluate("""() => { const data = document.getElementById('fig-timeline')._fullData;
            const i = data.findIndex(t => t.name === 'request'); return [i, data[i].customdata.map(r => Array.from(r))]; }""")
        trace, custom = markers
        embedded = page.page.evaluate("DATA.points[current].flame_trees.map(t => t[0])")
        j = next(j for j, cd in enumerate(custom) if cd[0] != shown and cd[0] in embedded)
        tree, node = custom[j][:2]
        page.click_point("fig-timeline", trace, j)
        page.page.wait_for_function(f"document.getElementById('flame').layout.meta.tree === {tree}")
        highlight = page.page.evaluate("document.getElementById('flame').layout.shapes.slice(-1)[0]")
        nodes = page.page.evaluate("document.getElementById('flame').layout.meta.nodes")
        assert highlight["line"]["color"] == "#d1495b"
        assert highlight["y0"] == pytest.approx(nodes.index(node) - 0.5)
        assert page.page.evaluate("document.getElementById('flame-tree').value") == str(tree)
        page.page.locator("#flame").screenshot(path=tmp_path / "flamegraph.png")
        page.page.locator("#fig-timeline").screenshot(path=tmp_path / "timeline.png")
        page.page.screenshot(path=tmp_path / "point-c6.png", full_page=True)

        # rows by lane (one row per lane of the run) and back: the bars land on their rows each time
        decode = tuple(int(COLORS["decode"][i:i + 2], 16) for i in (1, 3, 5))
        assert timeline_bars_on_their_rows(page, decode) > 1
        page.page.select_option("#timeline-rows", "lane")
        page.page.wait_for_function("document.getElementById('fig-timeline').layout.title.text.includes('by lane')")
        page.draw_all(13)
        ticks = page.page.evaluate("document.getElementById('fig-timeline').layout.yaxis.ticktext")
        assert ticks == [f"lane {i}" for i in range(6)]
        assert_every_graph_has_points(page, POINT_GRAPHS | frontiers)
        assert timeline_bars_on_their_rows(page, decode) == 6
        page.page.locator("#fig-timeline").screenshot(path=tmp_path / "timeline-lanes.png")
        page.page.select_option("#timeline-rows", "conversation")
        page.page.wait_for_function("document.getElementById('fig-timeline').layout.title.text"
                                    ".includes('by conversation')")
        assert timeline_bars_on_their_rows(page, decode) > 1
        page.page.locator("#fig-timeline").screenshot(path=tmp_path / "timeline-back.png")
        assert page.page.evaluate("document.documentElement.scrollWidth") <= 1400  # fits its window
        assert_toolbars_clear(page)
        assert page.errors == []


def test_run_report_in_chromium(sweep, tmp_path):
    path = write_report(sweep / "c2", tmp_path / "c2.html")
    with chromium_page() as page:
        page.visit(path.as_uri(), charts=12)
        assert_every_graph_has_points(page, POINT_GRAPHS)
        hover = page.page.get_attribute("section.summary:not([hidden]) td[title]", "title")
        assert "first chunk" in hover  # the definition of TTFT, on hover
        page.page.screenshot(path=tmp_path / "run.png", full_page=True)
        assert page.errors == []


def test_replica_run_report_in_chromium(replica_run, tmp_path):
    """A run on two sim replicas with a CPU tier: the KV chart draws the mean, each replica and the
    CPU tier; the in-flight chart both of its lines."""
    path = write_report(replica_run, tmp_path / "replicas.html")
    with chromium_page() as page:
        page.visit(path.as_uri(), charts=12)
        assert_every_graph_has_points(page, POINT_GRAPHS)
        names = page.page.evaluate("document.getElementById('fig-kv').data.map(t => t.name)")
        assert len(names) == 6 and "GPU replica 1 %" in names and "CPU tier replica 0 %" in names
        assert page.page.evaluate("document.getElementById('fig-inflight').data.length") == 2
        page.page.locator("#fig-kv").screenshot(path=tmp_path / "kv.png")
        page.page.locator("#fig-inflight").screenshot(path=tmp_path / "inflight.png")
        assert page.errors == []


def test_each_bundle_draws_the_charts_of_the_pages_that_load_it(sweep, tmp_path):
    """Each vendored plotly.js bundle registers the trace types BUNDLES says, and draws without a
    console error every chart of the pages that pick it (bundle_for): a small frontier the one
    without WebGL, a frontier with a 300-point curve and a point page (embedded or fetched
    timelines, binned ones included) the full one. test_pages draws the served pages."""
    run = read_run(sweep / "c6")
    view = run_view(run)["payload"]
    binned = request_timeline(chart_blobs(run)["timeline_conversation"], detail_limit=10)
    rows = frontier_rows([(p.name, read_run(p).result) for p in sweep_folders(sweep)])
    # a 300-point curve of valid points (the sweep's own may be NOT VALID for their host error at speed 50)
    many = [{**rows[0], "id": f"p{i}", "valid": True, "reasons": [], "tput_per_gpu": rows[0]["tput_per_gpu"] * (1 - i / 400)}
            for i in range(300)]
    pages = {"frontier": {"frontier": frontier_chart(rows, *fr.CANONICAL)},
             "frontier, 300 points": {"frontier": frontier_chart(many, *fr.CANONICAL)},
             "point": {**view["figures"], "timeline": view["timeline"], "binned": binned,
                       "flame": next(iter(view["flames"].values()))}}
    assert trace_types(pages["point"]) == set(BUNDLES[FULL]) and trace_types(binned) <= LAZY_TYPES
    assert {name: bundle_for(trace_types(figures)) for name, figures in pages.items()} == {
        "frontier": "plotly-agentx-svg.min.js", "frontier, 300 points": FULL, "point": FULL}
    with chromium_page() as page:
        for name, figures in pages.items():
            bundle = bundle_for(trace_types(figures))
            page_path = tmp_path / f"{name}.html"
            page_path.write_text(f"<html><head><script>{plotly_js(bundle)}</script></head><body>"
                                 + "".join(f'<div id="{k}"></div>' for k in figures)
                                 + f"<script>const F = {script_json(figures)};"
                                 "Promise.all(Object.entries(F).map(([k, f]) => Plotly.newPlot(k, f.data, f.layout)))"
                                 ".then(() => { window.drawn = true; });</script></body></html>")
            page.page.goto(page_path.as_uri())
            page.page.wait_for_function("window.drawn === true")
            assert set(page.page.evaluate("Object.keys(Plotly.PlotSchema.get().traces)")) == BUNDLES[bundle]
            assert_every_graph_has_points(page, set(figures))
            page.page.screenshot(path=tmp_path / f"bundle-{name}.png", full_page=True)
        page.page.locator("#binned").screenshot(path=tmp_path / "binned-timeline.png")
        assert page.errors == []
