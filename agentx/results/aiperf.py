"""Import an AIPerf run (`profile_export.jsonl`, `profile_export_aiperf.json`,
`server_metrics_export.json`) as a point, so AIPerf and agentx runs share one frontier (SPEC §8).

The point's metrics follow agentx's definitions (SPEC §3), computed from AIPerf's per-request
records; the aggregate file gives identity, completeness and the theoretical prefix-cache hit;
the server-metrics export gives hit rates, KV usage and queue depth over AIPerf's profiling phase.
AIPerf does not know the deployment, so hardware, GPUs and engine come from the caller.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.metrics.server import COUNTERS, GAUGES
from agentx.metrics.summary import summarize
from agentx.records import Record
from agentx.results.importer import Imported
from agentx.results.runfolder import FLOAT_FIELDS, INT_FIELDS, STR_FIELDS
from agentx.results.schema import points
from agentx.results.series import build_histograms, build_series
from agentx.results.points import add_conversations, dataset_id, deployment_labels, insert_point, point_row
from agentx.results.timeline import build_conversations, build_timelines

FILES = ("profile_export.jsonl", "profile_export_aiperf.json")
PHASES = {"profiling": "profile", "warmup": "warmup"}


def _load(folder: Path) -> tuple[list[dict], dict, dict | None]:
    for name in FILES:
        if not (folder / name).is_file():
            raise AgentxError(f"{folder}: no {name} (not an AIPerf artifact folder?)")
    rows = []
    path = folder / FILES[0]
    for i, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if line.strip():
            try:
                row = msgspec.json.decode(line)
            except msgspec.DecodeError as e:
                raise AgentxError(f"{path}: line {i}: {e}") from None
            for key in ("metadata", "metrics"):
                if not isinstance(row.get(key), dict):
                    raise AgentxError(f"{path}: line {i}: field {key!r} missing")
            rows.append(row)
    try:
        aggregate = json.loads((folder / FILES[1]).read_bytes())
        server_path = folder / "server_metrics_export.json"
        server = json.loads(server_path.read_bytes()) if server_path.exists() else None
    except ValueError as e:
        raise AgentxError(f"{folder}: an AIPerf JSON file is not JSON ({e})") from None
    return rows, aggregate, server


def _ms(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    return None if m is None else m["value"] / 1000.0


def _int(metrics: dict, name: str) -> int | None:
    m = metrics.get(name)
    return None if m is None else int(m["value"])


def _records(rows: list[dict], path: Path) -> list[Record]:
    t0 = min(r["metadata"].get("credit_issued_ns") or r["metadata"]["request_start_ns"] for r in rows)
    trees: dict = {}
    streams: dict = {}
    workers: dict = {}
    out = []
    for i, row in enumerate(rows, 1):
        meta, m = row["metadata"], row["metrics"]
        try:
            start, end = meta["request_start_ns"], meta["request_end_ns"]
            root = meta.get("root_correlation_id") or meta["x_correlation_id"]
        except KeyError as e:
            raise AgentxError(f"{path}: line {i}: field metadata.{e.args[0]} missing") from None
        tree = trees.setdefault(root, len(trees))
        stream = streams.setdefault((root, meta["x_correlation_id"]), sum(1 for k in streams if k[0] == root))
        isl, osl = _int(m, "input_sequence_length"), _int(m, "output_sequence_length")
        error = row.get("error")
        if meta.get("was_cancelled"):
            error = "cancelled"
        elif error is not None:
            error = str(error.get("type") or error.get("code") or "error") if isinstance(error, dict) else "error"
        cached = _int(m, "usage_prompt_cache_read_tokens")
        out.append(Record(
            run="aiperf", lane=workers.setdefault(meta.get("worker_id"), len(workers)), tree=tree, replay=0,
            session=str(meta.get("source_trace_id") or meta.get("conversation_id")), stream=stream,
            stream_kind="main" if not meta.get("agent_depth") else "subagent", node=int(meta.get("turn_index") or 0),
            phase=PHASES.get(meta.get("benchmark_phase"), "warmup"),
            planned=((meta.get("credit_issued_ns") or start) - t0) / 1e9, start=(start - t0) / 1e9,
            end=(end - t0) / 1e9, isl_planned=isl or 0, osl_planned=osl or 0, theo_cached=cached or 0,
            ttft=_ms(m, "time_to_first_token"), isl=isl, osl=osl, cached=cached, chunks=osl or 0,
            error=error, status=200 if error is None else 0))
    return out


def server_summary(export: dict | None) -> dict:
    """AIPerf's server-metrics export (profiling phase) in the vocabulary of SPEC §3."""
    if not export:
        return {"engine": "none", "scrapes": 0, "missing": ["no server_metrics_export.json"]}
    metrics = export.get("metrics") or {}

    def find(names: list[str]) -> dict | None:
        for name in names:
            for candidate in (name, name.removesuffix("_total")):
                if candidate in metrics:
                    return metrics[candidate]
        return None

    out: dict = {"engine": "vllm" if any(k.startswith("vllm:") for k in metrics) else "unknown",
                 "scrapes": sum(e.get("total_fetches", 0) for e in
                                ((export.get("summary") or {}).get("endpoint_info") or {}).values())}
    counters, missing = {}, []
    for metric, names in COUNTERS.items():
        found = find(names)
        if found is None:
            missing.append(metric)
        else:
            counters[metric] = sum(s["stats"].get("total", 0.0) for s in found["series"])
    for metric, names in GAUGES.items():
        found = find(names)
        if found is None:
            missing.append(metric)
            continue
        out[f"{metric}_mean"] = sum(s["stats"]["avg"] for s in found["series"])
        out[f"{metric}_max"] = sum(s["stats"]["max"] for s in found["series"])
    if counters.get("prefix_queries"):
        out["prefix_hit_rate"] = counters.get("prefix_hits", 0.0) / counters["prefix_queries"]
    if counters.get("external_queries"):
        out["external_hit_rate"] = counters.get("external_hits", 0.0) / counters["external_queries"]
    by_source = find(["vllm:prompt_tokens_by_source_total"])
    if by_source:
        out["prompt_tokens_by_source"] = {s["labels"].get("source"): s["stats"].get("total", 0.0)
                                          for s in by_source["series"]}
    out["counters"] = counters
    out["missing"] = [m for m in missing if m != "computed_prompt_tokens"]
    return out


def _columns(records: list[Record]) -> dict:
    cols = {}
    for name in FLOAT_FIELDS:
        cols[name] = np.array([np.nan if getattr(r, name) is None else getattr(r, name) for r in records], float)
    for name in INT_FIELDS:
        cols[name] = np.array([-1 if getattr(r, name) is None else getattr(r, name) for r in records], np.int64)
    for name in STR_FIELDS:
        cols[name] = [getattr(r, name) for r in records]
    return cols


def import_aiperf(engine: Engine, folder: Path, labels: dict) -> Imported:
    rows, aggregate, server = _load(folder)
    if not rows:
        raise AgentxError(f"{folder / FILES[0]}: no records")
    run_id = f"aiperf-{aggregate.get('benchmark_id') or folder.resolve().name}"
    with engine.connect() as conn:
        found = conn.execute(select(points.c.id).where(points.c.run_id == run_id)).scalar()
    if found is not None:
        return Imported(folder, found, False)
    config = aggregate.get("input_config") or {}
    phase = next((p for p in config.get("phases", []) if p.get("kind") == "profiling"), {})
    dataset = (config.get("datasets") or [{}])[0]
    models = (config.get("models") or {}).get("items") or [{}]
    settings = {**labels, "model": labels.get("model") or models[0].get("name"), "concurrency": phase.get("concurrency"),
                "duration": phase.get("duration"),
                "dataset": dataset.get("name") if dataset.get("type") != "file" else Path(dataset["path"]).name,
                "seed": (aggregate.get("run_info") or {}).get("random_seed"), "clock_scale": 1.0}
    records = _records(rows, folder / FILES[0])
    info = {"settings": settings, "finished": bool(aggregate.get("is_complete")) and not aggregate.get("was_cancelled"),
            "run_id": run_id, "start_time": aggregate.get("start_time"),
            "command": (aggregate.get("run_info") or {}).get("cli_command"),
            "agentx_version": f"aiperf {aggregate.get('aiperf_version')}"}
    result = summarize(records, info, [], [])
    result["server_metrics"] = server_summary(server)
    theoretical = (aggregate.get("theoretical_prefix_cache_hit") or {}).get("avg")
    if theoretical is not None and "cache" in result["request_metrics"]:
        result["request_metrics"]["cache"]["theoretical_hit_rate"] = theoretical / 100.0
    # AIPerf's own throughputs divide by the profiling phase's wall time (start_time..end_time),
    # agentx's by first start..last end (its `benchmark_duration`): kept beside, for reference
    result["source"] = {"tool": "aiperf", "version": aggregate.get("aiperf_version"),
                        "benchmark_id": aggregate.get("benchmark_id"),
                        "summary": {k: (aggregate.get(k) or {}).get("avg") for k in (
                            "request_throughput", "output_token_throughput", "total_token_throughput",
                            "benchmark_duration", "request_count")}}
    cols = _columns(records)
    blobs = {"series": build_series(cols, [], 1.0), "histograms": build_histograms(cols), **build_timelines(cols)}
    row = point_row(result, run_id, "aiperf", run_dir=str(folder.resolve()))
    with engine.begin() as conn:
        row["dataset_id"] = dataset_id(conn, settings["dataset"], None)
        if row["dataset_id"] is not None:
            add_conversations(conn, row["dataset_id"], build_conversations(cols))
        point = insert_point(conn, deployment_labels(result["identity"]), row, blobs)
    return Imported(folder, point, True)
