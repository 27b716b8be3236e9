"""How fast the report and the dashboard become interactive in headless Chromium (issue #15: a
100k-request point's page and its request timeline within 1.5 s each, the frontier of 1,000
points within 1 s).

A real short run on the simulated engine is tiled (its records and scrapes repeated, shifted in
time, trees renumbered) into a point of --requests requests: chart cost depends on the number of
requests and grid seconds, not on their values. Prints the time to build the HTML report, its
size, the time a page holding only an inlined plotly.js bundle needs to draw one tiny chart (the
floor of any page drawing with plotly.js: compiling the bundle; SPEC §9: the full one, and the one
without WebGL that the frontier loads), and the time of a zoom on the timeline. Past 20k requests
the timeline is binned (agentx/report/timeline.py). Then the same point and --points more
(benchmarks/results.py's fill) go into a database served by `agentx serve`. For the report and
the dashboard's frontier, point page and the point page's request timeline (first visit: a new
browser context, its cache empty, in a browser that has already loaded a page; again with
plotly.js in the browser's cache; and a third time, when Chrome has compiled it to its code
cache) it prints the seconds from navigation until the HTML has arrived, until plotly.js has run
(a performance mark), until the page is interactive (the charts of the first screen drawn, or the
first chart, scrolled to, where none starts on the first screen: the pages draw a chart when it
comes near the viewport; for the timeline rows, the timeline drawn when scrolled to as soon as the
page has it), and until every chart is drawn when the page is
scrolled through at once. Every browser step fails with a message naming it after 120 s.

    python benchmarks/dashboard.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgspec

from agentx.engine.launch import sim_server
from agentx.replay.driver import bench
from agentx.replay.folder import report
from agentx.replay.settings import BenchSettings
from agentx.records import read_records, write_parquet
from agentx.report.html import write_report
from agentx.report.toolkit import BUNDLES, plotly_js
from agentx.traces.load import load_sessions

SPEED = 50
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def real_run(folder: Path) -> None:
    from agentx.data import sample_traces

    with sim_server("--speed", str(SPEED)) as url:
        bench(BenchSettings.build(url=url, concurrency=16, duration=600, out=str(folder), clock_scale=SPEED, gpus=8,
                                  hardware="H200", engine="agentx-sim", warmup_requests_per_lane=3, grace=10),
              load_sessions([sample_traces()], None))


def tile(src: Path, dst: Path, n: int) -> int:
    """dst: src's records repeated as if more lanes had run beside them (lanes and trees renumbered,
    starts staggered by up to a second) up to n records; the server scrapes are src's."""
    dst.mkdir()
    for name in ("run.json", "trees.jsonl", "server_metrics.jsonl"):
        shutil.copy(src / name, dst / name)
    records = read_records(src)
    lanes, trees = max(r.lane for r in records) + 1, max(r.tree for r in records) + 1
    out, k = [], 0
    while len(out) < n:
        shift = (k % 20) * 0.05
        out += [msgspec.structs.replace(r, lane=r.lane + k * lanes, tree=r.tree + k * trees, start=r.start + shift,
                                        end=r.end + shift, planned=r.planned + shift) for r in records[: n - len(out)]]
        k += 1
    (dst / "records.jsonl").write_bytes(b"\n".join(msgspec.json.encode(r) for r in out) + b"\n")
    write_parquet(out, dst)  # as a finished run has
    report(dst)
    return len(out)


# the charts whose box starts inside the first screen are drawn (the page draws the others when
# they come near the viewport); where none does (a point page's verdict banner, cards and table
# fill a 900 px screen, so its first chart starts below it), the first chart, scrolled to
FIRST_SCREEN = """() => { const shown = [...document.querySelectorAll('.chart')].filter(d => d.offsetParent !== null);
    let c = shown.filter(d => d.getBoundingClientRect().top < innerHeight);
    if (c.length === 0 && shown.length > 0) { c = [shown[0]]; if (!shown[0]._fullLayout) shown[0].scrollIntoView(); }
    return c.length > 0 && c.every(d => d._fullLayout && d.data); }"""
# the request timeline, scrolled to as soon as the page has it (a user going straight to it)
TIMELINE = """() => { const d = document.getElementById('fig-timeline'); if (!d) return false; d.scrollIntoView();
    return !!(d._fullLayout && d.data && d.data.length); }"""
# scroll every chart into view, a frame apart (a frame not painted within 10 s fails the step:
# a requestAnimationFrame never called back once hung the benchmark for 14 minutes)
SCROLL_THROUGH = """async () => { for (const d of document.querySelectorAll('.chart')) { d.scrollIntoView();
    await new Promise((ok, fail) => { const t = setTimeout(() => fail(new Error('no frame within 10 s')), 10000);
        requestAnimationFrame(() => setTimeout(() => { clearTimeout(t); ok(); }, 0)); }); } }"""
WAIT_S = 120  # the longest any browser step may take (a 100k-request page needs seconds)


def step(what: str, action):
    """action(), a browser step, failing with a message naming `what` when it fails or takes over
    WAIT_S: Playwright's waits time out, but page.evaluate never does (hence the alarm)."""
    from playwright.sync_api import Error as PlaywrightError

    def hung(*_):
        raise SystemExit(f"dashboard benchmark: {what}: no result within {WAIT_S} s")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(WAIT_S + 5)  # after Playwright's own timeout, whose message says more
    try:
        return action()
    except PlaywrightError as e:
        raise SystemExit(f"dashboard benchmark: {what}: {e.message.splitlines()[0]}") from None
    finally:
        signal.alarm(0)


def load(page, url: str, ready: str, what: str) -> float:
    """Open `url`; until(ready)."""
    step(f"{what}: loading", lambda: page.goto(url, wait_until="commit", timeout=WAIT_S * 1000))
    return until(page, ready, what)


def until(page, ready: str, what: str) -> float:
    """Seconds from navigation until the JavaScript `ready` holds."""
    step(f"{what}: waiting until drawn", lambda: page.wait_for_function(ready, polling=20, timeout=WAIT_S * 1000))
    return step(f"{what}: reading the clock", lambda: page.evaluate("performance.now()")) / 1000


def timed(page, url: str, charts: int, target: str = FIRST_SCREEN) -> tuple[float, float, float, float]:
    """Seconds from navigation until: the HTML has arrived, plotly.js is evaluated, the page is
    interactive (`target`: the charts of the first screen drawn, or TIMELINE), and (scrolling
    through the page at once) all `charts` are drawn."""
    first = load(page, url, target, url + (": the first screen" if target == FIRST_SCREEN else ": the timeline"))
    step(f"{url}: scrolling through", lambda: page.evaluate(SCROLL_THROUGH))
    every = until(page, f"""() => {{ const g = document.querySelectorAll('.js-plotly-plot');
        return g.length >= {charts} && [...g].every(d => d._fullLayout && d.data); }}""", f"{url}: all charts")
    html, plotly = step(f"{url}: reading its timings", lambda: page.evaluate(
        """() => [performance.getEntriesByType('navigation')[0].responseEnd,
        performance.getEntriesByName('plotly.js evaluated')[0].startTime]"""))
    return html / 1000, plotly / 1000, first, every


def browser_times(path: Path, baselines: list[Path]) -> tuple[tuple, tuple, list[float], float]:
    """timed() of the report (first screen, then the timeline), seconds until a page holding only an
    inlined plotly.js bundle has drawn one tiny chart (per baseline page), and of a zoom on the timeline."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        new_page = lambda: browser.new_context(offline=True, viewport={"width": 1400, "height": 900}).new_page()  # noqa: E731
        alone = [load(new_page(), b.as_uri(), "(document.getElementById('g') || {})._fullLayout !== undefined",
                      f"the page of plotly.js alone ({b.name})") for b in baselines]
        page = new_page()
        report = timed(page, path.as_uri(), 11)
        timeline = timed(new_page(), path.as_uri(), 11, TIMELINE)
        zoom = step("zooming the report's timeline", lambda: page.evaluate("""async () => {
            const gd = document.getElementById('fig-timeline'), t0 = performance.now(), r = gd._fullLayout.xaxis.range;
            await Plotly.relayout(gd, {'xaxis.range': [r[0], (r[0] + r[1]) / 2]});
            return (performance.now() - t0) / 1000; }"""))
        browser.close()
    return report, timeline, alone, zoom


def served_times(run: Path, points: int, db: Path) -> list[tuple[str, list]]:
    """Under `agentx serve`, timed() of the frontier and the point page: first visit, again
    (plotly.js in the HTTP cache) and a third time (Chrome then uses its compiled code cache)."""
    from playwright.sync_api import sync_playwright

    from agentx.results.db import connect
    from agentx.results.importer import import_run
    from results import fill_points  # benchmarks/results.py

    engine = connect(f"sqlite:///{db}")
    point = import_run(engine, run).point_id
    fill_points(engine, points)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "agentx.cli", "serve", "--db", str(db), "--port", str(port),
                               "--read-only"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = time.monotonic()
        while True:
            try:
                urllib.request.urlopen(url + "/api/v1/deployments", timeout=1).close()
                break
            except OSError as e:
                if server.poll() is not None or time.monotonic() - started > 30:
                    raise SystemExit(f"dashboard benchmark: `agentx serve` did not answer at {url} within 30 s ({e})")
                time.sleep(0.1)
        requests = f"{len(read_records(run)):,} requests"
        pages = [(f"frontier, {points + 1:,} points", url + "/", 1, FIRST_SCREEN),
                 (f"point page, {requests}", f"{url}/points/{point}", 11, FIRST_SCREEN),
                 (f"request timeline, {requests}", f"{url}/points/{point}", 11, TIMELINE)]
        out = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            # a fresh browser's first navigation took 0.1-0.3 s longer to get its HTML (start-up a
            # user's running browser has behind it): paid here, in a context of its own
            warm = browser.new_context()
            step("warming the browser", lambda: warm.new_page().goto("data:text/html,<p>warm</p>",
                                                                      timeout=WAIT_S * 1000))
            warm.close()
            for name, page_url, charts, target in pages:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                first = timed(context.new_page(), page_url, charts, target)
                again = timed(context.new_page(), page_url, charts, target)  # same context: plotly.js cached
                third = timed(context.new_page(), page_url, charts, target)  # V8's code cache from the third load
                out.append((name, [("first", first), ("plotly.js cached", again), ("third visit", third)]))
                context.close()
            browser.close()
        return out
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


# issue #47's targets on a quiet machine, on the interactive time (the first screen's charts drawn)
TARGETS = {"frontier": 1.0, "point page": 1.5, "request timeline": 1.5}


def target(name: str) -> float | None:
    return next((t for prefix, t in TARGETS.items() if name.startswith(prefix)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=1000)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        base, big = Path(tmp) / "real", Path(tmp) / "tiled"
        real_run(base)
        n = tile(base, big, args.requests)
        t0 = time.perf_counter()
        html = write_report(big)
        build = time.perf_counter() - t0
        baselines = []
        for bundle in BUNDLES:
            baselines.append(Path(tmp) / f"{bundle}.html")
            baselines[-1].write_text(f"<html><head><script>{plotly_js(bundle)}</script></head><body><div id=g></div>"
                                     "<script>Plotly.newPlot('g', [{x: [1, 2], y: [1, 2]}])</script></body></html>")
        report, timeline, alone, zoom = browser_times(html, baselines)
        heads = [f"{b.removesuffix('.min.js')} alone s" for b in BUNDLES]
        print(f"{'requests':>10} {'build HTML s':>13} {'HTML MB':>8} " + " ".join(f"{h:>30}" for h in heads)
              + f" {'timeline zoom s':>16}")
        print(f"{n:>10,} {build:>13.2f} {html.stat().st_size / 1e6:>8.1f} " + " ".join(f"{a:>30.2f}" for a in alone)
              + f" {zoom:>16.2f}")
        rows = [("HTML report (plotly.js inline)", "first", report), ("HTML report: request timeline", "first", timeline)]
        served = served_times(big, args.points, Path(tmp) / "results.db")
        rows += [(name, visit, t) for name, visits in served for visit, t in visits]
        print(f"\n{'page (interactive: first screen drawn,':<38} {'visit':<16} {'HTML in s':>10} {'plotly.js run s':>16} "
              f"{'interactive s':>14} {'all drawn (scrolled) s':>23} {'target s':>9}\n{'  or its first chart; or the timeline)':<38}")
        for name, visit, (html_s, plotly_s, first_s, all_s) in rows:
            goal = target(name)
            met = "" if goal is None else f"{goal:>5.1f} {'met' if first_s <= goal else 'MISSED'}"
            print(f"{name:<38} {visit:<16} {html_s:>10.2f} {plotly_s:>16.2f} {first_s:>14.2f} {all_s:>23.2f} {met:>9}")
    print(f"\nload average (1 min) {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
          f"{os.cpu_count()} CPUs (timings are wall-clock: a busy machine slows them)")


if __name__ == "__main__":
    main()
