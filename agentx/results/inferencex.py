"""A point as InferenceX's flat AgentX metrics row (SPEC §8): their key names, p50 as `median_`,
times in seconds, interactivity in tokens per second."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.results.schema import deployments, points

STATS = {"median": "p50", "mean": "mean", "p75": "p75", "p90": "p90", "p95": "p95", "p99": "p99", "std": "std"}
# InferenceX metric -> agentx request_metrics distribution. agentx's ITL is vLLM's TPOT
# ((e2el - ttft) / (osl - 1)); per-chunk gaps are not in the result point, so no `*_itl` keys.
DISTRIBUTIONS = {"ttft": "ttft_s", "e2el": "e2el_s", "tpot": "itl_s", "intvty": "interactivity_tok_s",
                 "e2e_norm_intvty": "e2e_normalized_interactivity_tok_s"}


def inferencex_row(result: dict, labels: dict) -> dict:
    ident, rm, sm = result.get("identity") or {}, result.get("request_metrics") or {}, result.get("server_metrics") or {}
    tp, req = rm.get("throughput") or {}, result.get("requests") or {}
    row = {
        "hw": labels.get("hardware"), "num_gpus": labels.get("gpus"), "conc": ident.get("concurrency"),
        "model": labels.get("model"), "framework": labels.get("engine"), "precision": labels.get("precision"),
        "spec_decoding": labels.get("spec_decoding"), "parallelism": labels.get("parallelism"),
        "kv_offloading": labels.get("kv_offload"), "router": labels.get("router"), "dataset": ident.get("dataset"),
        "total_requests": req.get("total"), "profiled_requests": req.get("profiled"),
        "warmup_requests": req.get("warmup"), "error_requests": sum((req.get("errors") or {}).values()),
        "tput_per_gpu": tp.get("total_tok_s_per_gpu"), "output_tput_per_gpu": tp.get("output_tok_s_per_gpu"),
        "input_tput_per_gpu": tp.get("input_tok_s_per_gpu"), "total_tput": tp.get("total_tok_s"),
        "output_tput": tp.get("output_tok_s"), "input_tput": tp.get("input_tok_s"), "duration": tp.get("window_s"),
        "theoretical_cache_hit_rate": (rm.get("cache") or {}).get("theoretical_hit_rate"),
        "server_gpu_cache_hit_rate": sm.get("prefix_hit_rate"),
        "server_cpu_cache_hit_rate": sm.get("external_hit_rate"),
        "gpu_kv_cache_usage_pct": sm["kv_usage_mean"] * 100 if sm.get("kv_usage_mean") is not None else None,
        **_power(result.get("power") or {}),
    }
    for key, source in DISTRIBUTIONS.items():
        dist = rm.get(source) or {}
        for stat, field in STATS.items():
            if dist.get(field) is not None:
                row[f"{stat}_{key}"] = dist[field]
    return row


def _power(p: dict) -> dict:
    """InferenceX's power keys: measured (bench --power) when valid, else power_valid false."""
    if not p.get("valid"):
        return {"power_valid": False}
    return {"power_valid": True, "power_source": p.get("source"), "avg_power_w": p.get("avg_w"),
            "peak_power_w": p.get("peak_w"), "joules_per_output_token": p.get("joules_per_output_token"),
            "joules_per_total_token": p.get("joules_per_total_token"),
            "tok_s_per_mw": p.get("total_tok_s_per_mw"), "output_tok_s_per_mw": p.get("output_tok_s_per_mw")}


def export_row(engine: Engine, point_id: int) -> dict:
    q = (select(points.c.result, points.c.status, *[deployments.c[k] for k in ("model", "hardware", "gpus", "engine",
                "precision", "spec_decoding", "parallelism", "kv_offload", "router")])
         .join(deployments, points.c.deployment_id == deployments.c.id).where(points.c.id == point_id))
    with engine.connect() as conn:
        row = conn.execute(q).first()
    if row is None:
        raise AgentxError(f"point {point_id}: not in the results database")
    if row.status != "ok" or not row.result:
        raise AgentxError(f"point {point_id}: failed, it has no metrics to export")
    try:
        result = json.loads(row.result)
    except (ValueError, RecursionError):
        result = None
    if not isinstance(result, dict):
        raise AgentxError(f"point {point_id}: its stored row is corrupt (result: not a JSON object)")
    return inferencex_row(result, dict(row._mapping))
