"""One self-contained HTML file for a run folder or a sweep folder: plotly.js inlined (the package's
partial bundle, static/), the figures as JSON, drawn by a little plain JavaScript. No network."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT
from agentx.report.capacity import is_plan_folder, write_plan_report
from agentx.report.flame import flamegraph
from agentx.report.overtime import over_time
from agentx.report.point import summary_rows, token_histogram
from agentx.report.rundata import RunData, is_run_folder, read_run, sweep_folders
from agentx.report.frontier_chart import (TEXT_COLUMNS, X_LABELS, Y_LABELS, Palette, deployment, frontier_chart,
                                          frontier_rows, point_info, readable_rows, table_rows, write_csv)
from agentx.report.timeline import TIMELINE_TYPES, request_timeline
from agentx.report.toolkit import bundle_for, page_assets, plotly_js, script_json, templates, trace_types
from agentx.results import frontier as fr
from agentx.results.importer import chart_blobs

FLAME_TREES = 60  # flamegraphs embedded per point (the trees with the most requests)


def flame_trees(timeline: dict, limit: int = FLAME_TREES) -> list[list]:
    """[tree, label] of the `limit` trees with the most requests in a stored timeline."""
    trees, first, sizes = np.unique(np.asarray(timeline["tree"], dtype=np.int64), return_index=True,
                                    return_counts=True)
    out = []
    for i in np.lexsort((trees, -sizes))[:limit].tolist():
        tree, session = int(trees[i]), timeline["sessions"][timeline["session"][first[i]]]
        out.append([tree, f"tree {tree}: {session} ({sizes[i]} requests)"])
    return out


LAZY_PARTS = ("timeline", "timeline_lane", "flame_trees")  # what a served point page fetches beside its HTML
LAZY_TYPES = TIMELINE_TYPES | {"bar"}  # the trace types of its timelines and flamegraphs


def point_part(part: str, blobs: dict[str, dict]) -> dict | list:
    """One of a point's LAZY_PARTS from its stored chart data: the request timeline by conversation or
    by lane, or the conversations whose flamegraphs the page offers."""
    if part == "timeline_lane":
        return request_timeline(blobs["timeline_lane"])
    if part == "timeline":
        return request_timeline(blobs["timeline_conversation"])
    return flame_trees(blobs["timeline_conversation"])


def _invalid_reasons(result: dict) -> list[str] | None:
    """A NOT VALID point's reasons (the banner atop its page), None for a valid one."""
    v = result.get("validity") or {}
    return None if v.get("valid") is not False else (v.get("reasons") or ["no reason recorded"])


def point_view(name: str, result: dict, command: str, blobs: dict[str, dict], flames: dict | None = None,
               flame_url: str = "", parts_url: str = "", download_url: str = "") -> dict:
    """One point of a page: its summary and everything the page draws, from the point's stored chart
    data (SPEC §8; `chart_blobs` of a run folder). Flamegraphs are embedded (`flames`, by tree) or
    fetched from `flame_url` + tree on demand. With `parts_url` the page fetches the LAZY_PARTS
    (parts_url + part) while it draws the first screen, and `blobs` need only `series` and
    `histograms`: a 100k-request point's timelines are megabytes the first screen does not show."""
    summary, invalid = summary_rows(result), _invalid_reasons(result)
    cards = [c for c in summary_cards(summary) if not (invalid and c["label"] == "valid")]  # the banner says it
    page = {"name": name, "deployment": deployment(result), "summary": summary, "cards": cards,
            "identity": result["identity"], "command": command or summary["provenance"]["command"] or "",
            "download": download_url, "invalid": invalid}
    figures = {"isl": token_histogram(blobs["histograms"], "isl"), "osl": token_histogram(blobs["histograms"], "osl"),
               **over_time(blobs["series"])}
    payload = {"name": name, "figures": figures, "flames": {str(t): f for t, f in (flames or {}).items()},
               "flame_url": flame_url, "parts_url": parts_url,
               **({} if parts_url else {part: point_part(part, blobs) for part in LAZY_PARTS})}
    return {"page": page, "payload": payload}


# a figure's label -> (what it is, its unit): "total tok/s per GPU" -> ("total per GPU", "tok/s")
UNIT = re.compile(r"^(?P<what>.*?)\s+(?P<unit>tok/s|ms|s|W|J)(?P<per> per .+)?$|^(?P<usd>\$) per ")


WIDE_CARD = 60  # characters


def summary_cards(summary: dict) -> list[dict]:
    """The summary's single figures as cards: a label, the value with its unit apart, the definition."""
    cards = []
    for label, value, definition in summary["figures"]:
        m = UNIT.match(label)
        what, unit = (label, "") if m is None or m["usd"] else ((m["what"] + (m["per"] or "")).strip(), m["unit"])
        if m is not None and m["usd"] and value != "-":  # "$ per M output tokens": the unit reads before the number
            value = f"${value}"
        if not any(ch.isdigit() for ch in str(value)):  # "not measured", "none": no unit
            unit = ""
        cards.append({"label": what or label, "value": value, "unit": unit, "definition": definition,
                      "bad": label == "valid" and not str(value).startswith("yes"),
                      "wide": len(str(value)) > WIDE_CARD})  # a sentence (a NOT VALID's reasons): a row of its own
    return cards


def run_view(run: RunData) -> dict:
    """point_view of a run folder: its chart data computed as an import stores it, its flamegraphs embedded."""
    blobs = chart_blobs(run)
    trees = [t for t, _ in flame_trees(blobs["timeline_conversation"])]
    return point_view(run.path.name, run.result, run.info.get("command", ""), blobs,
                      {t: flamegraph(run, t) for t in trees})


def frontier_views(rows: list[dict], spread_limit: float = ANSWER_SPREAD_LIMIT) -> dict[str, dict]:
    """The frontier chart of every (x, y) view, keyed "x|y"."""
    palette = Palette.of(rows)
    return {f"{x}|{y}": frontier_chart(rows, x, y, palette, spread_limit=spread_limit) for x in X_LABELS
            for y in Y_LABELS}


def frontier_extras(rows: list[dict], x: str, palette: Palette | None = None) -> dict:
    """What a frontier page's script takes beside its figures: each point's pinned-tooltip figures,
    every axis' label, the hardware colours, whether lower x is better."""
    return {"info": point_info(rows), "axes": {**X_LABELS, **Y_LABELS},
            "colors": (palette or Palette.of(rows)).colors(), "x_better": fr.X_METRICS.get(x, 1)}


def render(title: str, views: list[dict], frontiers: dict[str, dict] | None = None, view: str = "",
           table: list[dict] | None = None, plotly_src: Callable[[str], str] | None = None,
           links: dict[str, str] | None = None, nav: list[tuple[str, str]] | None = None, empty_hint: str = "",
           csv: str | None = None, table_links: list[str] | None = None, filters: dict | None = None,
           pages: list | None = None, preload: list[str] | None = None, served: bool = False,
           extras: dict | None = None, controls: dict | None = None) -> str:
    """The page: the frontier charts in `frontiers` ("x|y" -> figure; `view` the one shown first;
    views not embedded are served: a change of view reloads the page with x and y in its URL) and
    the `table` when given, then the point `views` (point_view). The smallest plotly.js bundle
    drawing them is inlined, or loaded from the URL `plotly_src(bundle)` when given; `links`
    (point id -> URL) makes a frontier click open that URL instead of a point of the page; `nav`
    lists (label, URL) of related pages; an empty `table` says there are no points, followed by
    `empty_hint`; `csv` names the table's CSV beside the file; `filters` (name -> (value,
    choices)) draws the served frontier's filter form, `pages` its table's page links; `preload`
    lists URLs the page will fetch, asked for before plotly.js loads so that the server builds
    them meanwhile. `served`: a page of `agentx serve` (its links, the answer layer and compare);
    `extras` (frontier_extras) go to the script, `controls` (keep: hidden form fields, log: (x, y),
    target) set the frontier's controls."""
    frontiers = frontiers or {}
    data = {"points": [v["payload"] for v in views], "links": links or {}, "frontiers": frontiers,
            "view": view or next(iter(frontiers), ""), "served": served, "info": {}, "axes": {}, **(extras or {})}
    controls = {"keep": {}, "log": (False, False), "target": None, **(controls or {})}
    lazy = any(p["parts_url"] for p in data["points"])  # timelines and flamegraphs (bars) fetched later
    bundle = bundle_for(trace_types(data) | (LAZY_TYPES if lazy else set()))
    return templates().get_template("report.html.j2").render(
        title=title, points=[v["page"] for v in views], sweep_rows=table, has_frontier=bool(frontiers),
        nav=nav or [], x_labels=X_LABELS, y_labels=Y_LABELS, view=data["view"].split("|") if frontiers else ["", ""],
        empty_hint=empty_hint, csv=csv, links=bool(links), table_links=table_links, filters=filters, pages=pages,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), served=served,
        text_columns=TEXT_COLUMNS | {"deployment", "started", "configuration"}, **controls, **page_assets(),
        plotly_src=plotly_src(bundle) if plotly_src else None, preload=preload or [],
        plotly_js=None if plotly_src else plotly_js(bundle), data_json=script_json(data))


def write_report(path: Path, out: Path | None = None, spread_limit: float = ANSWER_SPREAD_LIMIT) -> Path:
    """report.html in the run, sweep or plan folder (and sweep.csv for a sweep); returns the HTML's
    path. `spread_limit`: the frontier's bound on a point's TTFT interval (metrics/confidence.py)."""
    path = Path(path)
    if is_plan_folder(path):  # `agentx sim plan`'s folder: its own page (report/capacity.py)
        return write_plan_report(path, out)
    out = out or path / "report.html"
    if is_run_folder(path):
        page = render(f"agentx run report: {path.resolve().name}", [run_view(read_run(path))])
    else:
        runs = [read_run(p) for p in sweep_folders(path)]
        results = [(str(run.path.relative_to(path)), run.result) for run in runs]
        rows = write_csv(table_rows(results), path / "sweep.csv")
        points = frontier_rows(results)
        page = render(f"agentx sweep report: {path.resolve().name}", [run_view(run) for run in runs],
                      frontier_views(points, spread_limit), "|".join(fr.CANONICAL), readable_rows(rows), csv="sweep.csv",
                      extras=frontier_extras(points, fr.CANONICAL[0]))
    out.write_text(page, encoding="utf-8")
    return out
