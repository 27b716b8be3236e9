"""The dashboard's dataset explorer (SPEC §9): a dataset's charts, the runs that replayed it (each
a link to its point) and a page of its conversations, each as replayed most completely over every
run imported (the `runs` that replayed it beside); a conversation's flamegraph."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from sqlalchemy import func, select

from agentx.report.dataset import conversation_flamegraph, dataset_charts, digest_charts
from agentx.report.frontier_chart import deployment_label
from agentx.report.toolkit import charts_page, stored_json
from agentx.results.api import MAX_ID, ItemId
from agentx.results.schema import conversations, datasets, deployments, points
from agentx.traces.digest import digest_stats
from agentx.traces.stats_tables import STATS_COLUMNS, stats_rows

PAGE_ROWS = 1000  # conversations per dataset page (a dataset holds up to millions)
MAX_CHARTED = 20_000  # conversations charted on a dataset page without a digest
RUN_ROWS = 200  # runs listed on a dataset page (the latest)


def _conversation_table(convs: list, whole: dict) -> dict:
    columns = ["session", "requests replayed", "runs", "subagent groups", "input tokens", "cached tokens",
               "output tokens", "theoretical hit"]
    replayed = lambda c: (f"{c['turns']:,} of {len(whole[c['session']]['nodes']):,}"  # noqa: E731
                          if isinstance(whole.get(c["session"]), dict) and "nodes" in whole[c["session"]]
                          else f"{c['turns']:,}")
    return {"columns": columns, "rows": [
        (f"/conversations/{c['id']}", [c["session"], replayed(c), f"{c['runs']:,}", c["subagent_groups"],
                                       f"{c['input_tokens']:,}", f"{c['cached_tokens']:,}", f"{c['output_tokens']:,}",
                                       f"{c['cached_tokens'] / c['input_tokens']:.1%}" if c["input_tokens"] else "-"])
        for c in convs]}


def _runs_table(db, dataset_id: int) -> tuple[dict | None, int]:
    """The runs (points) over the dataset, the latest first, and how many there are."""
    total = db.rows(select(func.count()).select_from(points).where(points.c.dataset_id == dataset_id))[0][0]
    rows = db.rows(select(points.c.id, points.c.concurrency, points.c.status, points.c.valid, points.c.requests_ok,
                          points.c.started_at, *[deployments.c[k] for k in ("gpus", "hardware", "engine", "model")])
                   .join(deployments, points.c.deployment_id == deployments.c.id)
                   .where(points.c.dataset_id == dataset_id).order_by(points.c.id.desc()).limit(RUN_ROWS))
    if not rows:
        return None, 0
    shown = "" if total <= RUN_ROWS else f" (the latest {RUN_ROWS:,})"
    return {"title": f"Runs over this dataset: {total:,}{shown}",
            "columns": ["point", "configuration", "concurrency", "requests ok", "started", "verdict"],
            "rows": [(f"/points/{r.id}", [f"point {r.id}", deployment_label(r._mapping), r.concurrency or "-",
                                          f"{r.requests_ok:,}" if r.requests_ok is not None else "-",
                                          (r.started_at or "-")[:19].replace("T", " "),
                                          "failed" if r.status != "ok" else "valid" if r.valid else "NOT VALID"])
                     for r in rows]}, total


def _charts(db, dataset_id: int, digest: dict | None) -> tuple[dict, dict | None]:
    """The dataset's charts and trace stats: from its digest, else over its replayed conversations."""
    if digest is not None:
        rows_, caption = stats_rows(digest_stats(digest))
        return digest_charts(digest), {"title": "Trace statistics (as `agentx trace stats` prints them)",
                                       "columns": STATS_COLUMNS, "rows": rows_, "caption": caption}
    trees = db.rows(select(conversations).where(conversations.c.dataset_id == dataset_id)
                    .order_by(conversations.c.id).limit(MAX_CHARTED))
    return dataset_charts([{**r._mapping, "tree": t} for r in trees if isinstance(t := stored_json(r.tree), dict)]), None


def dataset_routes(app: FastAPI, db) -> None:
    """`db`: the pages' queries (`pages._Pages`: rows, digest)."""
    @app.get("/datasets/{dataset_id}", response_class=HTMLResponse, include_in_schema=False)
    def dataset_page(dataset_id: ItemId, offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0) -> str:
        """The dataset's charts, its runs and a page of its conversations (PAGE_ROWS from `offset`)."""
        found = db.rows(select(datasets.c.name, datasets.c.variant, datasets.c.conversations)
                        .where(datasets.c.id == dataset_id))
        if not found:
            raise HTTPException(404, f"dataset {dataset_id} not found")
        digest = db.digest(dataset_id)
        cols = [c for c in conversations.c if c.name != "tree"]
        shown = db.rows(select(*cols).where(conversations.c.dataset_id == dataset_id).order_by(conversations.c.id)
                        .limit(PAGE_ROWS).offset(offset))
        table = _conversation_table([r._mapping for r in shown], (digest or {}).get("conversations") or {})
        name = found[0].name + (f" ({found[0].variant})" if found[0].variant else "")
        charts, stats = _charts(db, dataset_id, digest)
        runs, n_runs = _runs_table(db, dataset_id)
        note = "" if digest else " (no trace stats stored: charts over the replayed conversations)"
        total = found[0].conversations or 0
        nav = [("frontier", "/")]
        if offset > 0:
            nav.append(("previous conversations", f"/datasets/{dataset_id}?offset={max(0, offset - PAGE_ROWS)}"))
        if offset + PAGE_ROWS < total:
            nav.append(("next conversations", f"/datasets/{dataset_id}?offset={offset + PAGE_ROWS}"))
        return charts_page(f"agentx dataset: {name}, {total:,} conversations{note}", charts, nav, table,
                           f"Conversations {offset + 1:,}-{offset + len(shown):,} of {total:,}, each as replayed most "
                           f"completely over the {n_runs:,} runs imported (of the requests the trace has; runs: "
                           f"how many replayed it)", stats=stats, runs=runs)

    @app.get("/conversations/{conversation_id}", response_class=HTMLResponse, include_in_schema=False)
    def conversation_page(conversation_id: ItemId) -> str:
        found = db.rows(select(conversations).where(conversations.c.id == conversation_id))
        if not found:
            raise HTTPException(404, f"conversation {conversation_id} not found")
        tree = stored_json(found[0].tree)
        if not isinstance(tree, dict):
            raise HTTPException(422, f"conversation {conversation_id}: its stored row is corrupt (tree: not a JSON "
                                     f"object)")
        conv = {**found[0]._mapping, "tree": tree}
        whole = (db.digest(conv["dataset_id"]) or {}).get("conversations", {}).get(conv["session"])
        return charts_page(f"agentx conversation: {conv['session']}", {"flame": conversation_flamegraph(conv, whole)},
                           [("frontier", "/"), ("dataset", f"/datasets/{conv['dataset_id']}")])
