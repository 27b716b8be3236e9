"""Screenshots of the dashboard's frontier, point, compare and dataset pages, light and dark, 1,440
and 390 px wide (issue #47), and what the browser test's LOOKS probe finds wrong on each (none, or
a line per finding): real runs of the simulated engine in virtual time (three configurations at
three concurrencies, 900 modeled seconds each, drained, over a synthetic corpus), imported into a database
that `agentx serve` serves, drawn in Debian's headless Chromium. Each PNG holds the top of the
page, at most two windows tall.

    python tools/screenshots.py [--out docs/screenshots/issue-47] [--work FOLDER]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.report.browser import chromium_page, looks_wrong  # noqa: E402
from tests.results.conftest import agentx_serve  # noqa: E402

CONFIGS = (("H200", "vllm"), ("H200", "sglang"), ("B200", "vllm"))
LEVELS = "4,12,32"
VIEWS = (("light", 1440, 900), ("dark", 1440, 900), ("light", 390, 844), ("dark", 390, 844))
DRAWN = "[...document.querySelectorAll('.chart')].every(d => d._fullLayout)"


def runs(folder: Path) -> list[Path]:
    """A sweep per configuration in virtual time (`agentx sim bench --drain`) over a synthetic corpus
    of 300 sessions (`agentx trace synth`, 256k variant): enough session trees for confident points.
    Run in `folder`, so the workload is named by the corpus' folder name."""
    cli = [sys.executable, "-m", "agentx.cli"]
    subprocess.run([*cli, "trace", "synth", "--out", "synth-300", "--sessions", "300", "--max-context", "256k"],
                   check=True, capture_output=True, cwd=folder)
    out = []
    for hardware, engine in CONFIGS:
        subprocess.run([*cli, "sim", "bench", "--traces", "synth-300", "--concurrency", LEVELS, "--duration", "900",
                        "--drain", "--hardware", hardware, "--engine", engine, "--out", f"{hardware}-{engine}"],
                       capture_output=True, cwd=folder)  # exit 3 for a NOT VALID point: drawn as such
        out.append(folder / f"{hardware}-{engine}")
    return out


def shoot(url: str, pages: dict[str, str], out: Path) -> list[str]:
    """Each page in each view as a PNG in `out`; the LOOKS findings, a line each."""
    findings = []
    for scheme, width, height in VIEWS:
        with chromium_page(width=width, height=height, allow=url, dark=scheme == "dark") as page:
            for name, path in pages.items():
                page.page.goto(url + path)
                # a page draws a chart as it comes near the window: each chart not drawn yet brought there
                # and waited for, until all are (a starved renderer may miss a quick pass)
                page.page.evaluate("""async () => { for (let pass = 0; pass < 20; pass++) {
                    const left = [...document.querySelectorAll('.chart')].filter(d => !d._fullLayout);
                    if (!left.length) break;
                    for (const d of left) { d.scrollIntoView(); await new Promise(r => setTimeout(r, 200)); } }
                    window.scrollTo(0, 0); }""")
                page.page.wait_for_function(DRAWN, polling=100, timeout=300_000)
                page.page.wait_for_timeout(300)
                findings += [f"{name} {scheme} {width}px: {w}" for w in looks_wrong(page)]
                tall = page.page.evaluate("document.documentElement.scrollHeight")
                page.page.screenshot(path=out / f"{name}-{scheme}-{width}.png", full_page=True,
                                     clip={"x": 0, "y": 0, "width": width, "height": min(tall, 2 * height)})
            findings += [f"console ({scheme} {width}px): {e}" for e in page.errors]
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "issue-47")
    parser.add_argument("--work", type=Path, help="keep the runs and database here (reused when it holds them)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        db = str(work / "results.db")
        if not (work / "results.db").exists():
            subprocess.run([sys.executable, "-m", "agentx.cli", "db", "import", *map(str, runs(work)), "--db", db],
                           check=True, capture_output=True)
        with agentx_serve(db, "--read-only") as (url, _, _):
            points = json.loads(urllib.request.urlopen(url + "/api/v1/points?status=ok", timeout=30).read())
            ids = [p["id"] for p in sorted(points, key=lambda p: p["id"])]
            pages = {"frontier": "/", "point": f"/points/{ids[1]}", "compare": f"/compare?points={ids[1]},{ids[4]}",
                     "dataset": "/datasets/1"}
            findings = shoot(url, pages, args.out)
    for name in sorted(args.out.glob("*.png")):
        print(f"{name.relative_to(ROOT)}: {name.stat().st_size / 1024:,.0f} KiB")
    print("\n".join(findings) or "LOOKS: nothing wrong on any page")


if __name__ == "__main__":
    main()
