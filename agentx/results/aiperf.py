"""Import an AIPerf run (`profile_export.jsonl`, `profile_export_aiperf.json`,
`server_metrics_export.json`) as a point, so AIPerf and agentx runs share one frontier (SPEC §8).

The point's metrics follow agentx's definitions (SPEC §3), computed from AIPerf's per-request
records; the aggregate file gives identity, completeness and the theoretical prefix-cache hit;
the server-metrics export gives hit rates, KV usage and queue depth over AIPerf's profiling phase.
AIPerf does not know the deployment, so hardware, GPUs and engine come from the caller.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import msgspec
import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.metrics.server import COUNTERS, GAUGES
from agentx.metrics.summary import summarize
from agentx.records import Record
from agentx.results import aiperf_files as af
from agentx.results.importer import Imported
from agentx.results.runfolder import FLOAT_FIELDS, INT_FIELDS, STR_FIELDS, _field
from agentx.results.runschema import MAX_GRID, Result
from agentx.results.schema import points
from agentx.results.series import build_histograms, build_series
from agentx.results.points import (add_conversations, check_conversations, dataset_id, deployment_labels, insert_point,
                                   point_row)
from agentx.results.timeline import build_conversations, build_timelines
from agentx.userfiles import check_folder, shown

FILES = ("profile_export.jsonl", "profile_export_aiperf.json")
PHASES = {"profiling": "profile", "warmup": "warmup"}


def _load(folder: Path) -> tuple[list[af.RecordLine], af.Aggregate, af.ServerExport | None]:
    check_folder(folder)
    for name in FILES:
        if not (folder / name).exists():
            raise AgentxError(f"{shown(folder)}: no {name} (not an AIPerf artifact folder?)")
    return (af.read_records(folder / FILES[0]), af.read_aggregate(folder / FILES[1]),
            af.read_server(folder / "server_metrics_export.json"))


def _ms(metric: af.Millis | None) -> float | None:
    return None if metric is None else metric.value / 1000.0


def _int(metric: af.TokenCount | None) -> int | None:
    return None if metric is None else int(metric.value)


def _str(value) -> str | None:
    return None if value is None else str(value)


def _records(rows: list[af.RecordLine], path: Path) -> list[Record]:
    t0 = min(min(r.metadata.credit_issued_ns or r.metadata.request_start_ns, r.metadata.request_start_ns) for r in rows)
    last = max(r.metadata.request_end_ns for r in rows)
    if (last - t0) / 1e9 > MAX_GRID:
        raise AgentxError(f"{shown(path)}: the records span {(last - t0) / 1e9:,.0f} s, over the bound of "
                          f"{MAX_GRID:,} s (the charts' 1 s grid)")
    trees: dict = {}
    streams: dict = {}
    workers: dict = {}
    per_root: dict = {}
    out = []
    for row in rows:
        meta, m = row.metadata, row.metrics
        start, end = meta.request_start_ns, meta.request_end_ns
        root = meta.root_correlation_id or meta.x_correlation_id
        tree = trees.setdefault(root, len(trees))
        key = (root, meta.x_correlation_id)
        if key not in streams:
            streams[key] = per_root[root] = per_root.get(root, -1) + 1
        stream = streams[key]
        isl, osl = _int(m.input_sequence_length), _int(m.output_sequence_length)
        error = row.error
        if meta.was_cancelled:
            error = "cancelled"
        elif isinstance(error, af.ErrorInfo):
            error = str(error.type or error.code or "error")[:1000]
        elif error is not None:
            error = "error"
        cached = _int(m.usage_prompt_cache_read_tokens)
        out.append(Record(
            run="aiperf", lane=workers.setdefault(meta.worker_id, len(workers)), tree=tree, replay=0,
            session=str(_str(meta.source_trace_id) or _str(meta.conversation_id))[:300], stream=stream,
            stream_kind="main" if not meta.agent_depth else "subagent", node=int(meta.turn_index or 0),
            phase=PHASES.get(meta.benchmark_phase, "warmup"),
            planned=((meta.credit_issued_ns or start) - t0) / 1e9, start=(start - t0) / 1e9,
            end=(end - t0) / 1e9, isl_planned=isl or 0, osl_planned=osl or 0, theo_cached=cached or 0,
            ttft=_ms(m.time_to_first_token), isl=isl, osl=osl, cached=cached, chunks=osl or 0,
            error=error, status=200 if error is None else 0))
    return out


def _stat(series: list[dict], name: str, mean: bool = False) -> float | None:
    """A statistic over a metric's series (their sum; their mean for a fraction per engine, as
    the KV usage is: agentx.metrics.server does the same); None where no series gives it."""
    values = [s["stats"][name] for s in series if name in s["stats"]]
    if not values:
        return None
    return sum(values) / len(values) if mean else sum(values)


def server_summary(export: af.ServerExport | dict | None) -> dict:
    """AIPerf's server-metrics export (profiling phase) in the vocabulary of SPEC §3."""
    if isinstance(export, af.ServerExport):
        export = msgspec.to_builtins(export)
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
        total = _stat((find(names) or {}).get("series", []), "total")
        if total is None:  # no series, or none with its total: absent, never 0
            missing.append(metric)
        else:
            counters[metric] = total
    for metric, names in GAUGES.items():
        series = (find(names) or {}).get("series", [])
        mean, peak = _stat(series, "avg", metric == "kv_usage"), _stat(series, "max", metric == "kv_usage")
        if mean is None:
            missing.append(metric)
            continue
        out[f"{metric}_mean"] = mean
        if peak is not None:
            out[f"{metric}_max"] = peak
    if counters.get("prefix_queries") and "prefix_hits" in counters:
        out["prefix_hit_rate"] = counters["prefix_hits"] / counters["prefix_queries"]
    if counters.get("external_queries") and "external_hits" in counters:
        out["external_hit_rate"] = counters["external_hits"] / counters["external_queries"]
    by_source = find(["vllm:prompt_tokens_by_source_total"])
    if by_source:
        out["prompt_tokens_by_source"] = {s["labels"].get("source"): s["stats"]["total"]
                                          for s in by_source["series"] if "total" in s["stats"]}
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
        raise AgentxError(f"{shown(folder / FILES[0])}: no records")
    name = aggregate.benchmark_id or folder.resolve().name
    run_id = f"aiperf-{name}" if re.fullmatch(r"[A-Za-z0-9._:-]{1,50}", name) else \
        f"aiperf-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    with engine.connect() as conn:
        found = conn.execute(select(points.c.id).where(points.c.run_id == run_id)).scalar()
    if found is not None:
        return Imported(folder, found, False)
    records = _records(rows, folder / FILES[0])
    result = _result(aggregate, server, labels, records, run_id)
    try:  # the labels given on the command line are bounded as a run folder's are
        msgspec.convert(result, Result)
    except msgspec.ValidationError as e:
        raise AgentxError(f"{shown(folder)}: {_field(e)}") from None
    cols = _columns(records)
    blobs = {"series": build_series(cols, [], 1.0), "histograms": build_histograms(cols), **build_timelines(cols)}
    convs = build_conversations(cols)
    check_conversations(folder, convs)
    row = point_row(result, run_id, "aiperf", run_dir=str(folder.resolve()))
    with engine.begin() as conn:
        row["dataset_id"] = dataset_id(conn, result["identity"]["dataset"], None)
        if row["dataset_id"] is not None:
            add_conversations(conn, row["dataset_id"], convs)
        point = insert_point(conn, deployment_labels(result["identity"]), row, blobs)
    return Imported(folder, point, True)


def _result(aggregate: af.Aggregate, server, labels: dict, records: list[Record], run_id: str) -> dict:
    config = aggregate.input_config
    phase = next((p for p in config.phases if p.kind == "profiling"), af.Phase())
    dataset = config.datasets[0] if config.datasets else af.DatasetConfig()
    model = config.models.items[0].name if config.models.items else None
    settings = {**labels, "model": labels.get("model") or model, "concurrency": phase.concurrency,
                "duration": phase.duration,
                "dataset": dataset.name if dataset.type != "file" else Path(dataset.path or "").name or None,
                "seed": aggregate.run_info.random_seed, "clock_scale": 1.0}
    info = {"settings": settings, "finished": bool(aggregate.is_complete) and not aggregate.was_cancelled,
            "run_id": run_id, "start_time": aggregate.start_time, "command": aggregate.run_info.cli_command,
            "agentx_version": f"aiperf {aggregate.aiperf_version}"}
    result = summarize(records, info, [], [])
    result["server_metrics"] = server_summary(server)
    theoretical = aggregate.theoretical_prefix_cache_hit.avg if aggregate.theoretical_prefix_cache_hit else None
    if theoretical is not None and "cache" in result["request_metrics"]:
        result["request_metrics"]["cache"]["theoretical_hit_rate"] = theoretical / 100.0
    # AIPerf's own throughputs divide by the profiling phase's wall time (start_time..end_time),
    # agentx's by first start..last end (its `benchmark_duration`): kept beside, for reference
    result["source"] = {"tool": "aiperf", "version": aggregate.aiperf_version,
                        "benchmark_id": aggregate.benchmark_id,
                        "summary": {k: getattr(getattr(aggregate, k), "avg", None) for k in (
                            "request_throughput", "output_token_throughput", "total_token_throughput",
                            "benchmark_duration", "request_count")}}
    return result
