"""How fast the HTML report of a 100k-request point becomes interactive in headless Chromium
(issue #15: the point detail and the request timeline within 1.5 s each).

A real short run on the simulated engine is tiled (its records and scrapes repeated, shifted in
time, trees renumbered) into a point of --requests requests: chart cost depends on the number of
requests and grid seconds, not on their values. Prints the time to build the HTML, its size, the
time from navigation until every chart is drawn, and the time of a zoom on the timeline.

    python benchmarks/dashboard.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import msgspec

from agentx.engine.launch import sim_server
from agentx.replay.driver import BenchSettings, bench, report
from agentx.replay.records import read_records
from agentx.report.html import write_report
from agentx.traces.load import load_sessions

SPEED = 50
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def real_run(folder: Path) -> None:
    from agentx.data import sample_traces

    with sim_server("--speed", str(SPEED)) as url:
        bench(BenchSettings(url=url, concurrency=16, duration=600, out=str(folder), clock_scale=SPEED, gpus=8,
                            hardware="H200", engine="agentx-sim", warmup_requests_per_lane=3, grace=10),
              load_sessions([sample_traces()], None))


def tile(src: Path, dst: Path, n: int) -> int:
    """dst: src's records repeated (shifted by the run's span, trees renumbered) up to n records."""
    dst.mkdir()
    for name in ("run.json", "trees.jsonl"):
        shutil.copy(src / name, dst / name)
    records = read_records(src)
    span = max(r.end for r in records) + 1.0
    trees = max(r.tree for r in records) + 1
    scrapes = [json.loads(line) for line in (src / "server_metrics.jsonl").read_text().splitlines()]
    out, k = [], 0
    with open(dst / "records.jsonl", "wb") as f, open(dst / "server_metrics.jsonl", "w") as s:
        while len(out) < n:
            for r in records[: n - len(out)]:
                shift = k * span
                phase = r.phase if k == 0 else "profile"
                out.append(msgspec.structs.replace(r, tree=r.tree + k * trees, start=r.start + shift,
                                                   end=r.end + shift, planned=r.planned + shift, phase=phase))
            for row in scrapes:
                s.write(json.dumps({**row, "t": row["t"] + k * span, "phase": "profile" if k else row["phase"]}) + "\n")
            k += 1
        f.write(b"\n".join(msgspec.json.encode(r) for r in out) + b"\n")
    report(dst)
    return len(out)


def browser_times(path: Path) -> tuple[float, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(offline=True, viewport={"width": 1400, "height": 900}).new_page()
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_function("""() => { const g = document.querySelectorAll('.js-plotly-plot');
            return g.length >= 11 && [...g].every(d => d._fullLayout && d.data.length); }""",
                               polling=20, timeout=120_000)
        drawn = page.evaluate("performance.now()") / 1000
        zoom = page.evaluate("""async () => { const gd = document.getElementById('fig-timeline'), t0 = performance.now();
            const r = gd._fullLayout.xaxis.range; await Plotly.relayout(gd, {'xaxis.range': [r[0], (r[0] + r[1]) / 2]});
            return (performance.now() - t0) / 1000; }""")
        browser.close()
    return drawn, zoom


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base, big = Path(tmp) / "real", Path(tmp) / "tiled"
        real_run(base)
        n = tile(base, big, args.requests)
        t0 = time.perf_counter()
        html = write_report(big)
        build = time.perf_counter() - t0
        drawn, zoom = browser_times(html)
        print(f"{'requests':>10} {'build HTML s':>13} {'HTML MB':>8} {'all charts drawn s':>19} {'timeline zoom s':>16}")
        print(f"{n:>10,} {build:>13.2f} {html.stat().st_size / 1e6:>8.1f} {drawn:>19.2f} {zoom:>16.2f}")


if __name__ == "__main__":
    main()
