"""The dashboard's pages beside the results API (`agentx serve`, SPEC §9): the frontier of the
stored points (filters in the URL, a click opens the point), a point's detail (summary, charts
over time, request timeline, conversation flamegraphs, its sibling points one click away), and
the dataset explorer (charts over its conversations, their list, a conversation's flamegraph),
drawn by the report's chart builders. plotly.js (the package's bundle) is served at a URL holding
its hash, cached by the browser for good."""

from __future__ import annotations

import gzip
from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

import msgspec
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT
from agentx.report.dataset_pages import dataset_routes
from agentx.report.flame import flamegraph
from agentx.report.html import LAZY_PARTS, frontier_extras, point_part, point_view, render
from agentx.report.rundata import RunData, read_run
from agentx.report.toolkit import (BUNDLES, FAVICON_SVG, bundle_for, fmt_number, page_assets, plotly_digest, plotly_js,
                                   plotly_url, script_json, static_bytes, stored_json, templates, trace_types)
from agentx.report.compare import figure_rows, overlay_charts, settings_rows
from agentx.report.frontier_chart import X_LABELS, Y_LABELS, Palette, deployment_label, frontier_chart, point_info
from agentx.results import frontier as fr
from agentx.results.api import MAX_ID, ItemId
from agentx.results.query import KINDS, LABEL_FILTERS, Filters, filtered, unsound
from agentx.serving import log_line
from agentx.results.schema import datasets, deployments, point_blobs, points
from agentx.results.points import unpack
from agentx.userfiles import is_regular

TABLE_PAGE = 100  # rows of the frontier page's table
# the figures the frontier's table shows beside its x and y
TABLE_METRICS = ("tput_per_gpu", "output_tput_per_gpu", "p90_ttft", "p50_intvty", "p90_e2e_norm_intvty", "p90_e2el",
                 "usd_per_m_tok_neocloud")
LABELS = {**X_LABELS, **Y_LABELS}
FLAME_MAX_RECORDS = 512 << 20  # a run folder's records this server reads to draw a flamegraph
TreeId = Annotated[int, PathParam(ge=0, le=MAX_ID)]


@cache
def plotly_gzip(bundle: str) -> bytes:
    return gzip.compress(plotly_js(bundle).encode(), mtime=0)


@lru_cache(maxsize=2)
def read_run_cached(run_dir: str) -> RunData:
    """A run folder's records, kept for the next flamegraph of the same point."""
    return read_run(Path(run_dir))


def add_pages(app: FastAPI, engine: Engine) -> None:
    # done now, not on the first visit (~0.1 s of it: compressing plotly.js, compiling the templates)
    by_digest = {plotly_digest(bundle): bundle for bundle in BUNDLES}
    for bundle in BUNDLES:
        plotly_gzip(bundle)
    for name in ("report.html.j2", "charts.html.j2", "compare.html.j2", "docs.html.j2", "error.html.j2"):
        templates().get_template(name)

    db = _Pages(engine)
    _plotly_route(app, by_digest)
    _frontier_route(app, db)
    _point_routes(app, db)
    dataset_routes(app, db)
    _compare_route(app, db)
    _docs_routes(app)
    _error_pages(app)


def wants_html(request: Request) -> bool:
    """A browser's request for a page: not under the API, and it accepts text/html (the API and
    curl's `*/*` get JSON)."""
    return not request.url.path.startswith("/api/") and "text/html" in request.headers.get("accept", "")


def _error_pages(app: FastAPI) -> None:
    """Errors as an HTML page to a browser (SPEC §9), as FastAPI's JSON to everything else."""
    from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def page(status: int, detail: str) -> HTMLResponse:
        title = f"{status}: " + {404: "not found", 422: "not a valid request"}.get(status, "error")
        return HTMLResponse(templates().get_template("error.html.j2").render(
            title=title, detail=detail, served=True, **page_assets()), status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if not wants_html(request):
            return await http_exception_handler(request, exc)
        return page(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        if not wants_html(request):
            return await request_validation_exception_handler(request, exc)
        return page(422, "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or e['loc'][0]}: {e['msg']}"
                                   for e in exc.errors()))


class _Pages:
    """The queries the pages share, on one database."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def rows(self, q) -> list:
        with self.engine.connect() as conn:
            return list(conn.execute(q))

    def filter_choices(self, f: Filters) -> dict:
        """name -> (value, choices; None for a date) of the frontier's filter form."""
        labels = {k: sorted({str(v) for (v,) in self.rows(select(deployments.c[k]).distinct()) if v})
                  for k in LABEL_FILTERS}
        names = sorted({n for (n,) in self.rows(select(datasets.c.name).distinct()) if n})
        return {**{k: (getattr(f, k), labels[k]) for k in LABEL_FILTERS if labels[k] or getattr(f, k)},
                "kind": (f.kind, list(KINDS)), "dataset": (f.dataset, names), "since": (f.since, None),
                "until": (f.until, None)}

    def palette(self) -> Palette:
        """Colours and markers over every hardware and engine stored (a filter never reshuffles them)."""
        return Palette.of([r._mapping for r in self.rows(select(deployments.c.hardware, deployments.c.engine))])

    def with_axis_figures(self, found: list[dict], f: Filters) -> list[dict]:
        """The rows of `found` (the points the filters match) with every axis metric (the table and
        a pinned tooltip show them all)."""
        q = filtered(select(points.c.id, *[fr.metric_column(k) for k in (*X_LABELS, *Y_LABELS)])
                     .join(deployments, points.c.deployment_id == deployments.c.id), f)
        rows = (dict(r._mapping) for r in self.rows(q.where(points.c.status == "ok")))
        figures = {r["id"]: fr.with_derived(r) for r in rows if not unsound(r)}
        return [{**figures.get(r["id"], {}), **r} for r in found]

    def digest(self, dataset_id: int) -> dict | None:
        """The dataset's stored digest (datasets.summary), None when it has none."""
        found = self.rows(select(datasets.c.summary).where(datasets.c.id == dataset_id))
        digest = stored_json(found[0].summary) if found else None
        return digest if isinstance(digest, dict) else None  # none stored, or a corrupt row: pages go without

    def blobs_of(self, point_id: int, kinds: set[str]) -> dict[str, dict]:
        """The point's stored chart data of these kinds (404 when a kind is missing)."""
        found = {kind: _unpacked(data) for kind, data in self.rows(select(point_blobs.c.kind, point_blobs.c.data)
                 .where(point_blobs.c.point_id == point_id).where(point_blobs.c.kind.in_(kinds)))}
        if {k for k, v in found.items() if v is not None} != kinds:  # missing, or a corrupt blob
            raise HTTPException(404, f"point {point_id} has no chart data (import it again)")
        return found


def _unpacked(data: bytes):
    try:
        return unpack(data)
    except (OSError, EOFError, ValueError, msgspec.DecodeError):  # a corrupt blob: the chart data is missing
        return None


def _result_of(point_id: int, text: str | None) -> dict:
    result = stored_json(text)
    if not isinstance(result, dict):
        raise HTTPException(422, f"point {point_id}: its stored row is corrupt (result: not a JSON object); import "
                                 f"its run folder again")
    return result


def _plotly_route(app: FastAPI, by_digest: dict[str, str]) -> None:
    @app.get("/static/plotly-{digest}.min.js", include_in_schema=False)
    def plotly(digest: str, request: Request) -> Response:
        if digest not in by_digest:
            raise HTTPException(404, f"no plotly.js bundle {digest} (this server has {', '.join(by_digest)})")
        bundle = by_digest[digest]
        headers = {"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):  # compressed once, not per request
            return Response(plotly_gzip(bundle), media_type="text/javascript",
                            headers={**headers, "Content-Encoding": "gzip"})
        return Response(plotly_js(bundle), media_type="text/javascript", headers=headers)


def _frontier_route(app: FastAPI, db: _Pages) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def frontier_page(request: Request, x: Annotated[str, Query(max_length=100)] = fr.CANONICAL[0],
                      y: Annotated[str, Query(max_length=100)] = fr.CANONICAL[1], page: int = Query(0, ge=0, le=MAX_ID),
                      at: float | None = Query(None, allow_inf_nan=False), logx: bool = False,
                      logy: bool = False,
                      spread_limit: float = Query(ANSWER_SPREAD_LIMIT, ge=0, le=100, allow_inf_nan=False)) -> str:
        f = _page_filters(request)
        try:
            found = fr.load_points(db.engine, f, x, y, skipped := [])
        except AgentxError as e:
            raise HTTPException(422, str(e)) from None
        for bad in skipped:  # the page shows the others; the log says which row and why
            log_line(f"/: skipped corrupt point {bad['id']}: {bad['reason']}")
        found = db.with_axis_figures(found, f)
        shown = found[page * TABLE_PAGE:(page + 1) * TABLE_PAGE]
        more = [k for k in TABLE_METRICS if k not in (x, y)]
        table = [{"point": r["id"], "concurrency": r["concurrency"], "deployment": deployment_label(r),
                  X_LABELS[x]: fmt_number(r[x]), Y_LABELS[y]: fmt_number(r[y]),
                  **{LABELS[k]: fmt_number(r.get(k)) for k in more},
                  "started": (r["started_at"] or "")[:16].replace("T", " "),
                  "valid": {True: "yes", False: "no"}.get(r["valid"], "-") + (" (low n)" if r["low_sample"] else "")}
                 for r in shown]
        query = {**{k: v for k, v in vars(f).items() if v}, "x": x, "y": y}
        pages = [(f"{k * TABLE_PAGE + 1}-{min((k + 1) * TABLE_PAGE, len(found))}",
                  None if k == page else "/?" + urlencode({**query, "page": k}))
                 for k in range(-(-len(found) // TABLE_PAGE))] if len(found) > TABLE_PAGE else []
        sets = db.rows(select(datasets.c.id, datasets.c.name, datasets.c.conversations).order_by(datasets.c.id))
        palette = db.palette()
        frontiers = {f"{x}|{y}": frontier_chart(found, x, y, palette, (logx, logy), spread_limit)} if found else {}
        keep = {"x": x, "y": y, **({"at": at} if at is not None else {}), **({"logx": 1} if logx else {}),
                **({"logy": 1} if logy else {}),
                **({"spread_limit": spread_limit} if spread_limit != ANSWER_SPREAD_LIMIT else {})}
        return render("agentx dashboard: frontier", [], frontiers, f"{x}|{y}", table,
                      plotly_url, links={r["id"]: f"/points/{r['id']}" for r in found},
                      nav=[(f"dataset {d.name} ({d.conversations} conversations)", f"/datasets/{d.id}") for d in sets],
                      empty_hint=" (import runs with `agentx db import RUN_DIR`, or change the filters)",
                      table_links=[f"/points/{r['id']}" for r in shown], filters=db.filter_choices(f), pages=pages,
                      served=True, extras={**frontier_extras([], x, palette), "info_url": "/points/"},
                      controls={"keep": keep, "log": (logx, logy), "target": at})

    @app.get("/points/{point_id}/info", include_in_schema=False)
    def point_tooltip(point_id: ItemId) -> Response:
        """What the frontier page's pinned tooltip shows of a point (point_info), asked for on a
        click: embedded for every point, it was 1 MB of a 1,000-point page."""
        f = Filters(point=point_id)
        found = db.with_axis_figures(fr.load_points(db.engine, f, *fr.CANONICAL), f)
        if not found:
            raise HTTPException(404, f"point {point_id} not found")
        return Response(script_json(point_info(found)[str(point_id)]), media_type="application/json")


def _page_filters(request: Request) -> Filters:
    """The frontier page's filters from its query string, bounded like the API's (422 otherwise)."""
    q = request.query_params
    values = {}
    for name in (*LABEL_FILTERS, "dataset", "since", "until", "kind"):
        v = q.get(name) or None
        if v is not None and (len(v) > 300 or "\x00" in v):
            raise HTTPException(422, f"{name}: at most 300 characters, no NUL")
        values[name] = v
    if values["kind"] is not None and values["kind"] not in KINDS:
        raise HTTPException(422, f"kind: one of {', '.join(KINDS)}")
    return Filters(**values)


def _point_routes(app: FastAPI, db: _Pages) -> None:
    @app.get("/points/{point_id}", response_class=HTMLResponse, include_in_schema=False)
    def point_page(point_id: ItemId) -> str:
        found = db.rows(select(points.c.deployment_id, points.c.result, points.c.run_dir).where(points.c.id == point_id))
        if not found:
            raise HTTPException(404, f"point {point_id} not found")
        deployment, result, run_dir = found[0]
        blobs = db.blobs_of(point_id, {"series", "histograms"})
        siblings = db.rows(select(points.c.id, points.c.concurrency).where(points.c.deployment_id == deployment)
                        .where(points.c.status == "ok").order_by(points.c.concurrency, points.c.id))
        nav = [("frontier", "/")] + [(f"c{c} (point {i})", f"/points/{i}") for i, c in siblings if i != point_id]
        result = _result_of(point_id, result)
        parts = f"/points/{point_id}/parts/"
        view = point_view(str(point_id), result, "", blobs, flame_url=f"/points/{point_id}/flames/", parts_url=parts,
                          download_url=f"/api/v1/points/{point_id}/result.json")
        return render(f"agentx point {point_id}: {Path(run_dir or '').name}", [view], plotly_src=plotly_url, nav=nav,
                      preload=[parts + "timeline"], served=True)

    @app.get("/points/{point_id}/parts/{part}", include_in_schema=False)
    def point_page_part(point_id: ItemId, part: str) -> Response:
        """What a point page fetches beside its HTML (point_view): a request timeline or the
        list of its conversations' flamegraphs."""
        if part not in LAZY_PARTS:
            raise HTTPException(404, f"no part {part!r} (one of {', '.join(LAZY_PARTS)})")
        kind = "timeline_lane" if part == "timeline_lane" else "timeline_conversation"
        return Response(script_json(point_part(part, db.blobs_of(point_id, {kind}))), media_type="application/json")

    @app.get("/points/{point_id}/flames/{tree}", include_in_schema=False)
    def point_flame(point_id: ItemId, tree: TreeId) -> Response:
        """A conversation's flamegraph of the point, from its run folder (records keep what the stored
        timeline does not: streams and planned times)."""
        found = db.rows(select(points.c.run_dir).where(points.c.id == point_id))
        if not found:
            raise HTTPException(404, f"point {point_id} not found")
        run_dir = found[0].run_dir or ""
        size = sum(f.stat().st_size for f in Path(run_dir).glob("records.*") if is_regular(f)) if run_dir else 0
        if size > FLAME_MAX_RECORDS:
            raise HTTPException(413, f"point {point_id}: its records ({size:,} bytes) are over the {FLAME_MAX_RECORDS:,} "
                                "bytes this server reads for a flamegraph")
        try:
            run = read_run_cached(run_dir)
        except AgentxError as e:
            raise HTTPException(404, f"point {point_id}: its run folder is not readable on this server ({e})")
        return Response(script_json(flamegraph(run, tree)), media_type="application/json")


MAX_COMPARED = 4


def _compare_route(app: FastAPI, db: _Pages) -> None:
    @app.get("/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(points_arg: str = Query("", alias="points", max_length=100)) -> str:
        """Two to four points side by side: /compare?points=3,7 (the URL is the comparison)."""
        try:
            ids = list(dict.fromkeys(int(p) for p in points_arg.split(",") if p.strip()))
        except ValueError:
            raise HTTPException(422, "points: point ids separated by commas, e.g. points=3,7") from None
        if len(ids) > MAX_COMPARED or any(not 1 <= i <= MAX_ID for i in ids):
            raise HTTPException(422, f"points: at most {MAX_COMPARED} point ids")
        found = {r.id: _result_of(r.id, r.result) for r in db.rows(select(points.c.id, points.c.result)
                                                                   .where(points.c.id.in_(ids)))}
        missing = [i for i in ids if i not in found]
        if missing:
            raise HTTPException(404, f"point {missing[0]} not found")
        results = [found[i] for i in ids]
        names = [f"point {i} (c{(r.get('identity') or {}).get('concurrency')})" for i, r in zip(ids, results)]
        figures = overlay_charts(names, [db.blobs_of(i, {"series"})["series"] for i in ids]) if ids else {}
        title = "agentx compare: " + (", ".join(names) if ids else "no points picked")
        return templates().get_template("compare.html.j2").render(
            title=title, names=names, ids=ids, settings=settings_rows(results), figures=figure_rows(results),
            figure_ids=list(figures), plotly_src=plotly_url(bundle_for(trace_types(figures))),
            data_json=script_json({"figures": figures, "ids": ids}), served=True, **page_assets())


def _docs_routes(app: FastAPI) -> None:
    """/docs: the vendored Swagger UI (static/swagger-ui, served as stored, gzip), and the favicon."""
    assets = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}

    @app.get("/static/swagger-ui/{name}", include_in_schema=False)
    def swagger_asset(name: str, request: Request) -> Response:
        if name not in assets:
            raise HTTPException(404, f"no {name}")
        data = static_bytes("swagger-ui", name + ".gz")
        headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(data, media_type=assets[name], headers={**headers, "Content-Encoding": "gzip"})
        return Response(gzip.decompress(data), media_type=assets[name], headers=headers)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> str:
        return templates().get_template("docs.html.j2").render(title="agentx results API", served=True,
                                                               **page_assets())

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(FAVICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})
