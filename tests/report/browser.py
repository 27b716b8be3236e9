"""Headless Chromium (Debian's package) driven by Playwright, offline, for the page tests."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# every Plotly graph div: its id, and per trace the number of points it draws (a heatmap's: cells with a value)
GRAPHS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    id: gd.id, points: gd._fullData.map(t => (t.type === 'heatmap' ? Array.from(t.z).flatMap(r => Array.from(r))
        : Array.from(t.x || [])).filter(v => v !== null && !Number.isNaN(v)).length),
    hidden: gd._fullData.map(t => t.visible !== true)}))"""

POINT_GRAPHS = {"fig-isl", "fig-osl", "fig-latency", "fig-queue", "fig-kv", "fig-inflight", "fig-hit_rate",
                "fig-sources", "fig-throughput", "fig-power", "fig-lateness", "fig-timeline", "flame"}


def assert_every_graph_has_points(page: "Page", expected: set[str]) -> None:
    """The page's graphs are exactly `expected`, and each draws at least one point."""
    graphs = page.graphs()
    assert {g["id"] for g in graphs} == expected
    for g in graphs:
        drawn = [n for n, hidden in zip(g["points"], g["hidden"]) if not hidden]
        assert drawn and max(drawn) > 0, g


class Page:
    """A page and everything it said on its console."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def graphs(self) -> list[dict]:
        return self.page.evaluate(GRAPHS)

    def draw_all(self, count: int) -> None:
        """Scroll every chart into view (a page draws a chart when it comes near the viewport) and
        wait until `count` graphs are drawn."""
        self.page.evaluate("""async () => { for (const d of document.querySelectorAll('.chart')) {
            d.scrollIntoView(); await new Promise(r => requestAnimationFrame(() => setTimeout(r, 30))); } }""")
        self.page.wait_for_function(f"pending.size === 0 && document.querySelectorAll('.js-plotly-plot').length >= {count}"
                                    " && [...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullData)")

    def click_point(self, graph_id: str, trace: int, point: int) -> None:
        """A real mouse click on a drawn point (its pixel from the graph's axes)."""
        self.page.evaluate("id => document.getElementById(id).scrollIntoView({block: 'center'})", graph_id)
        x, y = self.page.evaluate("""([id, i, j]) => {
            const gd = document.getElementById(id), t = gd._fullData[i], r = gd.getBoundingClientRect();
            const xa = gd._fullLayout[(t.xaxis || 'x').replace('x', 'xaxis')];
            const ya = gd._fullLayout[(t.yaxis || 'y').replace('y', 'yaxis')];
            return [r.left + xa._offset + xa.l2p(t.x[j]), r.top + ya._offset + ya.l2p(t.y[j])];
        }""", [graph_id, trace, point])
        self.page.mouse.move(x, y)
        self.page.mouse.click(x, y)


@contextmanager
def chromium_page(width: int = 1400, height: int = 900, allow: str | None = None):
    """A fresh page in headless Chromium, offline but for URLs starting with `allow`."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=allow is None, viewport={"width": width, "height": height})
            context.route(lambda url: url.startswith("http") and not (allow and url.startswith(allow)),
                          lambda route: route.abort())  # no other request may leave
            yield Page(context.new_page())
        finally:
            browser.close()
