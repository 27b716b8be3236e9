"""Hostile labels and session names stored in the results database (`<!--<script>`, a closing
script tag, event-handler markup, U+2028): the dashboard served by `agentx serve`, opened in
headless Chromium, still draws every chart of every page, shows each label as text, and runs no
injected script."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.report.browser import chromium_page
from tests.results.conftest import agentx_serve

LABELS = ["<!--<script>", "</script><script>window.injected=1</script>", "<img src=x onerror=window.injected=1>",
          "\u2028\u2029 & \"'<>", "<svg onload=window.injected=1>"]


def _hostile_copy(run, folder, n: int):
    out = folder / f"hostile-{n}"
    shutil.copytree(run, out)
    label = LABELS[n % len(LABELS)]
    result = json.loads((out / "result.json").read_text())
    result["identity"].update(model=label, engine=label[:100], dataset=label)
    result["provenance"]["run_id"] = f"hostile-{n}"
    (out / "result.json").write_text(json.dumps(result))
    info = json.loads((out / "run.json").read_text())
    info["run_id"] = f"hostile-{n}"
    (out / "run.json").write_text(json.dumps(info))
    (out / "records.parquet").unlink()
    text = (out / "records.jsonl").read_text()
    session = json.loads(text.splitlines()[0])["session"]
    (out / "records.jsonl").write_text(text.replace(json.dumps(session), json.dumps(label)))
    return out


@pytest.fixture(scope="module")
def hostile_dashboard(sweep, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    runs = folder / "runs"
    for n in range(len(LABELS)):
        _hostile_copy(sweep / ("c2" if n % 2 else "c6"), runs, n)
    db = str(folder / "results.db")
    cli = [sys.executable, "-m", "agentx.cli"]
    subprocess.run([*cli, "db", "import", str(runs), "--db", db], check=True, capture_output=True)
    with agentx_serve(db, "--read-only") as (url, _, _):
        yield url


def _drawn(page) -> list:
    graphs = page.graphs()
    assert graphs, "no chart on the page"
    for g in graphs:
        shown = [n for n, hidden in zip(g["points"], g["hidden"]) if not hidden]
        assert shown and max(shown) > 0, g
    return graphs


# About 22 pages with up to 12 Plotly charts each: 25 s on a quiet 2-core host, 32 s alone beside
# three busy processes; a page whose renderer stops is opened again (Page.visit), up to a minute
# and a half each, so a wider hang guard than the suite's 300 s.
@pytest.mark.timeout(900)
def test_every_page_draws_with_hostile_labels(hostile_dashboard):
    with chromium_page(allow=hostile_dashboard) as page:
        page.visit(hostile_dashboard + "/", "document.querySelectorAll('.js-plotly-plot').length >= 1")
        _drawn(page)
        table = page.page.inner_text("body")
        assert "<!--<script>" in table and "<img src=x onerror=window.injected=1>" in table  # shown as text
        for point in range(1, len(LABELS) + 1):
            page.visit(f"{hostile_dashboard}/points/{point}", charts=12)
            _drawn(page)
        rows, links = "", []
        for dataset in range(1, len(LABELS) + 1):
            page.visit(f"{hostile_dashboard}/datasets/{dataset}", "document.querySelectorAll('.js-plotly-plot').length >= 5")
            _drawn(page)
            rows += page.page.inner_text("body")
            links += page.page.eval_on_selector_all("#rows a", "as => as.map(a => a.getAttribute('href'))")
        assert all(label.strip() in rows for label in LABELS)  # dataset names (and sessions) shown as text
        for link in links[::3]:
            page.visit(hostile_dashboard + link, "document.querySelectorAll('.js-plotly-plot').length >= 1")
            _drawn(page)
        assert page.page.evaluate("window.injected") is None
        assert page.errors == []
