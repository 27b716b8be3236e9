"""One self-contained HTML file for a run folder or a sweep folder: plotly.js inlined from the
installed `plotly` package, the figures as JSON, drawn by a little plain JavaScript. No network."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import cache
from importlib.resources import files
from pathlib import Path

import jinja2

from agentx.report.flame import flamegraph, tree_sizes
from agentx.report.overtime import over_time
from agentx.report.point import summary_rows, token_histogram
from agentx.report.rundata import RunData, is_run_folder, read_run, sweep_folders
from agentx.report.sweep import X_METRICS, Y_METRICS, deployment, frontier_chart, table_rows, write_csv
from agentx.report.timeline import request_timeline

FLAME_TREES = 60  # flamegraphs embedded per point (the trees with the most requests)


@cache
def plotly_js() -> str:
    """plotly.min.js as the installed `plotly` package ships it."""
    return files("plotly").joinpath("package_data", "plotly.min.js").read_text(encoding="utf-8")


def templates() -> jinja2.Environment:
    """The package's Jinja2 templates (autoescaped)."""
    return jinja2.Environment(loader=jinja2.PackageLoader("agentx.report", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)


def point_payload(run: RunData) -> dict:
    """Everything the page draws for one point: figures by id and flamegraphs by tree."""
    sizes = tree_sizes(run)
    trees = sorted(sizes, key=lambda t: (-sizes[t], t))[:FLAME_TREES]
    figures = {"isl": token_histogram(run, "isl"), "osl": token_histogram(run, "osl"), **over_time(run),
               "timeline": request_timeline(run)}
    return {"name": run.path.name, "figures": figures, "timeline_lane": request_timeline(run, "lane"),
            "flames": {str(t): flamegraph(run, t) for t in trees},
            "flame_trees": [[t, f"tree {t}: {run.columns['session'][int((run.columns['tree'] == t).argmax())]} "
                                f"({sizes[t]} requests)"] for t in trees]}


def script_json(data) -> str:
    """`data` as JSON safe inside a <script> element (no NaN, no closing tag)."""
    return json.dumps(data, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")


def render(title: str, runs: list[RunData], frontier: list[tuple[str, dict]] | None = None,
           table: list[dict] | None = None, plotly_src: str | None = None, links: dict[str, str] | None = None,
           nav: list[tuple[str, str]] | None = None, empty_hint: str = "", csv: str | None = None) -> str:
    """The page: the frontier of the (name, result point) pairs in `frontier` and the `table` when
    given, then the detail of each run. plotly.js is inlined unless `plotly_src` (a URL) is given;
    `links` (point name -> URL) makes a frontier click open that URL instead of a point of the
    page; `nav` lists (label, URL) of related pages (a point's siblings); an empty `table` says
    there are no points, followed by `empty_hint`; `csv` names the table's CSV beside the file."""
    data = {"points": [point_payload(run) for run in runs], "links": links or {},
            "frontiers": {y: [frontier_chart(frontier, y, x) for x in range(len(X_METRICS))] for y in Y_METRICS}
            if frontier else {}}
    points = [{"name": run.path.name, "deployment": deployment(run.result), "summary": summary_rows(run.result),
               "identity": run.result["identity"], "command": run.info.get("command", "")} for run in runs]
    return templates().get_template("report.html.j2").render(
        title=title, points=points, sweep_rows=table, frontier_ids=list(data["frontiers"]), nav=nav or [],
        x_labels=[x[0] for x in X_METRICS],
        empty_hint=empty_hint, csv=csv, links=bool(links),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), plotly_src=plotly_src,
        plotly_js=None if plotly_src else plotly_js(), data_json=script_json(data))


def write_report(path: Path, out: Path | None = None) -> Path:
    """report.html in the run or sweep folder (and sweep.csv for a sweep); returns the HTML's path."""
    path = Path(path)
    out = out or path / "report.html"
    if is_run_folder(path):
        page = render(f"agentx run report: {path.resolve().name}", [read_run(path)])
    else:
        runs = [read_run(p) for p in sweep_folders(path)]
        results = [(run.path.name, run.result) for run in runs]
        rows = write_csv(table_rows(results), path / "sweep.csv")
        page = render(f"agentx sweep report: {path.resolve().name}", runs, results, rows, csv="sweep.csv")
    out.write_text(page, encoding="utf-8")
    return out
