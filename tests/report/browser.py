"""Headless Chromium (Debian's package) driven by Playwright, offline, for the page tests."""

from __future__ import annotations

import base64
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


# every graph's toolbar box against its title's and its buttons' boxes: pairs that overlap
TOOLBAR_OVERLAPS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => {
    const bar = gd.querySelector('.modebar'); if (!bar) return [];
    const a = bar.getBoundingClientRect();
    return [...gd.querySelectorAll('.gtitle, .updatemenu-container, .legend')].filter(el => {
        const b = el.getBoundingClientRect();
        return b.width && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    }).map(el => gd.id + ': ' + el.getAttribute('class'));
})"""


def assert_toolbars_clear(page: "Page") -> None:
    """No chart's plotly toolbar covers its title, its buttons or its legend."""
    assert page.page.evaluate(TOOLBAR_OVERLAPS) == []


class Page:
    """A page and everything it said on its console."""

    def __init__(self, page):
        self.errors: list[str] = []
        self._listen(page)

    def _listen(self, page) -> None:
        self.page = page
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def graphs(self) -> list[dict]:
        return self.page.evaluate(GRAPHS)

    def draw_all(self, count: int = 0) -> None:
        """Scroll every chart into view (a page draws a chart when it comes near the viewport) and
        wait until `count` graphs are drawn (0: every chart of the page). Paced by timers, not animation
        frames: beside busy processes a headless Chromium's renderer has stopped producing frames, and an
        await on a frame never returns (an evaluate has no timeout; it held a suite run for 25 minutes)."""
        self.page.evaluate("""async () => { for (const d of document.querySelectorAll('.chart')) {
            d.scrollIntoView(); await new Promise(r => setTimeout(r, 30)); } }""")
        every = "[...document.querySelectorAll('.chart')].every(d => d._fullLayout)" if count == 0 else "true"
        self.page.wait_for_function("(typeof pending === 'undefined' || pending.size === 0)"
                                    f" && document.querySelectorAll('.js-plotly-plot').length >= {count}"
                                    " && [...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullData)"
                                    f" && {every}", polling=100)

    def visit(self, url: str, ready: str = "", charts: int | None = None, tries: int = 3) -> None:
        """Open `url` and wait until the JS expression `ready` holds (or, with `charts`, until
        draw_all draws them). A page whose renderer stopped (a starved host, above; seen in a
        quiet one too, once in ~10 visits of a point page at 390 px) times out and is opened again
        in a new page, up to `tries` times; the last timeout is raised."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        for attempt in range(tries):
            try:
                self.page.goto(url)
                if charts is not None:
                    self.draw_all(charts)
                else:
                    self.page.wait_for_function(ready, polling=100)
                return
            except PlaywrightTimeout:
                if attempt == tries - 1:
                    raise
                old = self.page
                self._listen(old.context.new_page())
                old.close()

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


# per timeline row drawn: where its decode bars are and where it has no request (a gap between two of
# its requests), in page pixels (bars at least 8 px long, gaps 12; at most `limit` bars per row, so
# every row with a long enough bar is sampled, and `limit` gaps)
TIMELINE_SAMPLES = """([limit]) => {
    const gd = document.getElementById('fig-timeline'), box = gd.getBoundingClientRect();
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const t = gd._fullData.find(d => d.name === 'decode'), px = v => box.left + xa._offset + xa.l2p(v);
    const py = v => box.top + ya._offset + ya.l2p(v), bars = [], byRow = new Map(), sampled = new Map();
    for (let i = 0; i + 1 < t.x.length; i += 3) {
        const [x0, x1, y] = [t.x[i], t.x[i + 1], t.y[i]];
        if (!byRow.has(y)) byRow.set(y, []);
        byRow.get(y).push([x0, x1]);
        const w = px(x1) - px(x0);  // sampled 85 % along, and at least 4 px from its end (its antialiasing)
        if (w >= 8 && (sampled.get(y) || 0) < limit) {
            bars.push([px(x0) + Math.min(0.85 * w, w - 4), py(y), y]);
            sampled.set(y, (sampled.get(y) || 0) + 1);
        }
    }
    const gaps = [];
    const all = gd._fullData.filter(d => d.mode === 'lines');
    for (const [y, spans] of byRow) {  // a gap: no segment of any trace (queue, decode, error) of row y covers it
        const covered = all.flatMap(d => { const out = []; for (let i = 0; i + 1 < d.x.length; i += 3)
            if (d.y[i] === y) out.push([d.x[i], d.x[i + 1]]); return out; }).sort((a, b) => a[0] - b[0]);
        for (let k = 0; k + 1 < covered.length && gaps.length < limit; k++) {
            const end = Math.max(...covered.slice(0, k + 1).map(c => c[1])), next = covered[k + 1][0];
            if (px(next) - px(end) >= 12) gaps.push([px((end + next) / 2), py(y), y]);
        }
    }
    return {bars, gaps, rows: [...byRow.keys()].length};
}"""

# the RGBA of page pixels, read from a screenshot of the page as drawn (WebGL included)
PIXELS = """async ([png, points]) => {
    const img = new Image(); img.src = 'data:image/png;base64,' + png; await img.decode();
    const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
    const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
    return points.map(([x, y]) => Array.from(ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data));
}"""


def timeline_bars_on_their_rows(page: "Page", color: tuple[int, int, int]) -> int:
    """The request timeline as drawn: each sampled decode bar's pixel has the decode colour and each
    sampled gap between a row's requests does not (no bar drawn on a wrong row, none across the
    run). Returns the rows sampled."""
    page.page.evaluate("document.getElementById('fig-timeline').scrollIntoView({block: 'start'})")
    page.page.wait_for_timeout(300)
    samples = page.page.evaluate(TIMELINE_SAMPLES, [8])
    assert samples["bars"] and samples["gaps"], samples
    png = base64.b64encode(page.page.screenshot()).decode()
    near = lambda rgba: all(abs(a - b) <= 40 for a, b in zip(rgba, color))  # noqa: E731
    viewport = page.page.viewport_size
    inside = lambda pts: [p for p in pts if 0 <= p[0] < viewport["width"] and 0 <= p[1] < viewport["height"]]  # noqa: E731
    bars, gaps = inside(samples["bars"]), inside(samples["gaps"])
    assert bars and gaps
    drawn = page.page.evaluate(PIXELS, [png, [p[:2] for p in bars + gaps]])
    assert all(near(rgba) for rgba in drawn[:len(bars)]), list(zip(bars, drawn))
    assert not any(near(rgba) for rgba in drawn[len(bars):]), list(zip(gaps, drawn[len(bars):]))
    return len({p[2] for p in bars})


@contextmanager
def chromium_page(width: int = 1400, height: int = 900, allow: str | None = None, dark: bool = False):
    """A fresh page in headless Chromium, offline but for URLs starting with `allow`; `dark`: the
    system prefers a dark colour scheme."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=allow is None, viewport={"width": width, "height": height},
                                          color_scheme="dark" if dark else "light")
            context.route(lambda url: url.startswith("http") and not (allow and url.startswith(allow)),
                          lambda route: route.abort())  # no other request may leave
            yield Page(context.new_page())
        finally:
            browser.close()


# What a reader would see wrong on a page (each a string naming the element): a visible control whose
# text has a WCAG contrast under 4.5:1 against its background (HTML controls and plotly's chart buttons),
# a chart's title, legend, buttons and axis titles overprinting one another, a legend or title cut off by its chart,
# a legend far under its x axis' title (a blank band),
# frontier point labels overlapping one another, and the page wider than its window
LOOKS = """() => {
    const rgb = s => { const m = (s || '').match(/rgba?\\(([^)]+)\\)/); if (m) { const v = m[1].split(',').map(Number);
        return v.length > 3 && v[3] === 0 ? null : v.slice(0, 3); }
        const h = (s || '').match(/^#([0-9a-f]{6})$/i); return h ? [0, 2, 4].map(i => parseInt(h[1].substr(i, 2), 16)) : null; };
    const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
    const background = el => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor);
        if (c) return c; } return [255, 255, 255]; };
    const shown = el => { const b = el.getBoundingClientRect(); return b.width > 0 && b.height > 0 &&
        getComputedStyle(el).visibility !== 'hidden'; };
    const out = [];
    for (const el of document.querySelectorAll('button, select, input:not([type=checkbox]):not([type=hidden]), nav a, header a')) {
        if (!shown(el) || el.closest('.swagger-ui')) continue;
        const r = ratio(rgb(getComputedStyle(el).color), background(el));
        if (r < 4.5) out.push(`contrast ${r.toFixed(2)}: ${el.tagName} ${(el.textContent || el.name || '').trim().slice(0, 30)}`);
    }
    for (const b of document.querySelectorAll('.updatemenu-button')) {
        const fill = rgb(getComputedStyle(b.querySelector('rect')).fill), ink = rgb(getComputedStyle(b.querySelector('text')).fill);
        const r = ratio(ink, fill || background(b.closest('.js-plotly-plot')));
        if (r < 4.5) out.push(`contrast ${r.toFixed(2)}: chart button ${b.textContent}`);
    }
    const box = el => el.getBoundingClientRect();
    const over = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const parts = [...gd.querySelectorAll('.gtitle, .legend, .updatemenu-container, .xtitle, .ytitle, .modebar')]
            .filter(el => box(el).width > 0);
        for (let i = 0; i < parts.length; i++) for (let j = i + 1; j < parts.length; j++)
            if (over(box(parts[i]), box(parts[j]))) out.push(`overprint ${gd.id}: ${parts[i].getAttribute('class')} / ${parts[j].getAttribute('class')}`);
        const g = box(gd), legend = gd.querySelector('.legend');
        for (const t of gd.querySelectorAll('.gtitle, .xtitle, .ytitle'))  // a title wider than its chart is cut
            if (box(t).width && (box(t).right > g.right + 1 || box(t).left < g.left - 1)) out.push(`title cut ${gd.id}: ${t.textContent}`);
        if (legend && (box(legend).right > g.right + 1 || box(legend).left < g.left - 1 || box(legend).bottom > g.bottom + 1))
            out.push(`legend cut ${gd.id}`);
        const xtitle = gd.querySelector('.xtitle');  // a legend under the x title: right under it, no blank band
        if (legend && xtitle && box(xtitle).height && box(legend).top - box(xtitle).bottom > 24)
            out.push(`legend ${Math.round(box(legend).top - box(xtitle).bottom)} px under the x title ${gd.id}`);
        const right = gd._fullLayout.yaxis2, ticks = right && (right._vals || []).map(t => t.x);
        const step = ticks && ticks.length > 1 ? ticks[1] - ticks[0] : 0;
        if (right && right.visible !== false && step > 0) {  // round right-axis ticks: 1, 2, 2.5 or 5 x 10^k apart
            const lead = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
            if (![1, 2, 2.5, 5].some(d => Math.abs(lead - d) < 1e-6)) out.push(`right axis ticks ${gd.id}: every ${step}`);
        }
        const labels = [...gd.querySelectorAll('.textpoint text')].map(box).filter(b => b.width > 0);
        for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++)
            if (over(labels[i], labels[j])) out.push(`labels overlap ${gd.id}: ${i} / ${j}`);
    }
    if (document.documentElement.scrollWidth > window.innerWidth) out.push(`page ${document.documentElement.scrollWidth} px wide`);
    return out;
}"""


def looks_wrong(page: "Page") -> list[str]:
    """LOOKS on the page as drawn: what is wrong with it (empty when nothing is)."""
    return page.page.evaluate(LOOKS)
