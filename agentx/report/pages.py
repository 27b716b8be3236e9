"""The dashboard's pages beside the results API (`agentx serve`, SPEC §9): the frontier of the
stored points (filters in the URL, a click opens the point), a point's detail (summary, charts
over time, request timeline, conversation flamegraphs, its sibling points one click away), and
the dataset explorer (charts over its conversations, their list, a conversation's flamegraph),
drawn by the report's chart builders. plotly.js is served from the installed package."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.report.dataset import conversation_flamegraph, dataset_charts
from agentx.report.html import plotly_js, render, script_json, templates
from agentx.report.rundata import read_run
from agentx.report.sweep import table_rows
from agentx.results.query import Filters, filtered
from agentx.results.schema import conversations, datasets, deployments, points

PLOTLY = "/static/plotly.min.js"


def add_pages(app: FastAPI, engine: Engine) -> None:
    def rows(q) -> list:
        with engine.connect() as conn:
            return list(conn.execute(q))

    @app.get(PLOTLY, include_in_schema=False)
    def plotly() -> Response:
        return Response(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def frontier_page(model: str | None = None, hardware: str | None = None,
                      engine_label: str | None = Query(None, alias="engine"), dataset: str | None = None,
                      since: str | None = None, until: str | None = None) -> str:
        q = (select(points.c.id, points.c.result).join(deployments, points.c.deployment_id == deployments.c.id)
             .where(points.c.status == "ok").order_by(points.c.id))
        found = rows(filtered(q, Filters(model, hardware, engine_label, dataset, since, until)))
        results = [(str(r.id), json.loads(r.result)) for r in found]
        sets = rows(select(datasets.c.id, datasets.c.name, datasets.c.conversations).order_by(datasets.c.id))
        return render("agentx dashboard: frontier", [], results, table_rows(results), PLOTLY,
                      links={name: f"/points/{name}" for name, _ in results},
                      nav=[(f"dataset {d.name} ({d.conversations} conversations)", f"/datasets/{d.id}") for d in sets],
                      empty_hint=" (import runs with `agentx db import RUN_DIR`, or change the filters)")

    @app.get("/points/{point_id}", response_class=HTMLResponse, include_in_schema=False)
    def point_page(point_id: int) -> str:
        found = rows(select(points.c.run_dir, points.c.deployment_id).where(points.c.id == point_id))
        if not found:
            raise HTTPException(404, f"point {point_id} not found")
        run_dir, deployment = found[0]
        try:
            run = read_run(Path(run_dir or ""))
        except AgentxError as e:
            raise HTTPException(404, f"point {point_id}: its run folder is not readable on this server ({e})")
        siblings = rows(select(points.c.id, points.c.concurrency).where(points.c.deployment_id == deployment)
                        .where(points.c.status == "ok").order_by(points.c.concurrency, points.c.id))
        nav = [("frontier", "/")] + [(f"c{c} (point {i})", f"/points/{i}") for i, c in siblings if i != point_id]
        return render(f"agentx point {point_id}: {run.path.name}", [run], plotly_src=PLOTLY, nav=nav)

    def charts_page(title: str, figures: dict, nav: list, table: dict | None = None, table_title: str = "") -> str:
        return templates().get_template("charts.html.j2").render(
            title=title, nav=nav, figure_ids=list(figures), table=table, table_title=table_title,
            plotly_src=PLOTLY, data_json=script_json({"figures": figures}))

    @app.get("/datasets/{dataset_id}", response_class=HTMLResponse, include_in_schema=False)
    def dataset_page(dataset_id: int) -> str:
        found = rows(select(datasets.c.name, datasets.c.variant).where(datasets.c.id == dataset_id))
        if not found:
            raise HTTPException(404, f"dataset {dataset_id} not found")
        convs = [{**r._mapping, "tree": json.loads(r.tree)} for r in
                 rows(select(conversations).where(conversations.c.dataset_id == dataset_id).order_by(conversations.c.id))]
        columns = ["session", "requests", "subagent groups", "input tokens", "cached tokens", "output tokens",
                   "theoretical hit"]
        table = {"columns": columns, "rows": [
            (f"/conversations/{c['id']}", [c["session"], c["turns"], c["subagent_groups"], f"{c['input_tokens']:,}",
                                           f"{c['cached_tokens']:,}", f"{c['output_tokens']:,}",
                                           f"{c['cached_tokens'] / c['input_tokens']:.1%}" if c["input_tokens"] else "-"])
            for c in convs]}
        name = found[0].name + (f" ({found[0].variant})" if found[0].variant else "")
        return charts_page(f"agentx dataset: {name}, {len(convs)} conversations", dataset_charts(convs),
                           [("frontier", "/")], table, "Conversations (as replayed in the first run imported)")

    @app.get("/conversations/{conversation_id}", response_class=HTMLResponse, include_in_schema=False)
    def conversation_page(conversation_id: int) -> str:
        found = rows(select(conversations).where(conversations.c.id == conversation_id))
        if not found:
            raise HTTPException(404, f"conversation {conversation_id} not found")
        conv = {**found[0]._mapping, "tree": json.loads(found[0].tree)}
        return charts_page(f"agentx conversation: {conv['session']}", {"flame": conversation_flamegraph(conv)},
                           [("frontier", "/"), ("dataset", f"/datasets/{conv['dataset_id']}")])
