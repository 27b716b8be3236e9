"""Write points into the results database: deployments by natural key, a point's scalar metrics
and result JSON, its precomputed chart blobs, its dataset's conversations."""

from __future__ import annotations

import gzip
import hashlib
import json

import msgspec
from sqlalchemy import select
from sqlalchemy.engine import Connection

from agentx.engine.presets import COST_BASES, gpu_cost
from agentx.errors import AgentxError
from agentx.results.db import now
from agentx.userfiles import shown
from agentx.results.schema import DEPLOYMENT_LABELS, LATER_LABELS, METRIC_COLUMNS, conversations, datasets, deployments, \
    point_blobs, points


def pack(obj) -> bytes:
    """A chart blob as stored and served: gzip-compressed JSON."""
    return gzip.compress(msgspec.json.encode(obj), compresslevel=5, mtime=0)


def unpack(data: bytes):
    return msgspec.json.decode(gzip.decompress(data))


def deployment_key(labels: dict) -> str:
    values = [labels.get(k) for k in DEPLOYMENT_LABELS if k not in LATER_LABELS or labels.get(k) is not None]
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


def deployment_labels(identity: dict) -> dict:
    labels = {k: identity.get(k) for k in DEPLOYMENT_LABELS}
    return {k: (str(v) if v is not None and k != "gpus" else v) for k, v in labels.items()}


def deployment_id(conn: Connection, labels: dict) -> int:
    key = deployment_key(labels)
    found = conn.execute(select(deployments.c.id).where(deployments.c.key == key)).scalar()
    if found is not None:
        return found
    return conn.execute(deployments.insert().values(key=key, created_at=now(), **labels)).inserted_primary_key[0]


def dataset_id(conn: Connection, name: str | None, variant: str | None) -> int | None:
    if not name:
        return None
    where = (datasets.c.name == name) & (datasets.c.variant == (variant or ""))
    found = conn.execute(select(datasets.c.id).where(where)).scalar()
    if found is not None:
        return found
    return conn.execute(datasets.insert().values(name=name, variant=variant or "", conversations=0)
                        ).inserted_primary_key[0]


def check_conversations(source, convs: list[dict]) -> None:
    """Each conversation's totals fit the INTEGER columns (32 bits in PostgreSQL)."""
    for conv in convs:
        for key in ("turns", "subagent_groups", "input_tokens", "cached_tokens", "output_tokens"):
            if not 0 <= conv[key] <= 2**31 - 1:
                raise AgentxError(f"{shown(source)}: conversation {conv['session']!r}: {key} {conv[key]:,} outside "
                                  f"[0, 2^31 - 1]")


def add_conversations(conn: Connection, dataset: int, convs: list[dict]) -> None:
    """Store the run's conversations: a new session as it is; one the dataset holds counts one run
    more, and its replay is replaced when this run replayed more of it (every run imported counts,
    the most complete replay is kept; ties keep the first)."""
    have = {r.session: r for r in conn.execute(select(conversations.c.id, conversations.c.session,
                                                      conversations.c.turns, conversations.c.runs)
                                               .where(conversations.c.dataset_id == dataset))}
    rows = []
    for conv in convs:
        row = {**{k: v for k, v in conv.items() if k != "tree"}, "tree": json.dumps(conv["tree"]), "dataset_id": dataset}
        held = have.get(conv["session"])
        if held is None:
            rows.append({**row, "runs": 1})
        else:
            update = {"runs": held.runs + 1, **(row if conv["turns"] > held.turns else {})}
            conn.execute(conversations.update().where(conversations.c.id == held.id).values(**update))
    if rows:
        conn.execute(conversations.insert(), rows)
        conn.execute(datasets.update().where(datasets.c.id == dataset)
                     .values(conversations=len(have) + len(rows)))


def _get(d: dict | None, *path):
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def metric_columns(result: dict) -> dict:
    """The indexed scalar columns of a point from its result point (SPEC §8 defines each)."""
    rm, sm = result.get("request_metrics") or {}, result.get("server_metrics") or {}
    tp = rm.get("throughput") or {}
    per_gpu = tp.get("total_tok_s_per_gpu")
    out = {
        "tput_per_gpu": per_gpu, "output_tput_per_gpu": tp.get("output_tok_s_per_gpu"),
        "input_tput_per_gpu": tp.get("input_tok_s_per_gpu"), "total_tok_s": tp.get("total_tok_s"),
        "output_tok_s": tp.get("output_tok_s"),
        "theoretical_cache_hit_rate": _get(rm, "cache", "theoretical_hit_rate"),
        "server_prefix_hit_rate": sm.get("prefix_hit_rate"), "kv_usage_mean": sm.get("kv_usage_mean"),
    }
    for q in ("p50", "p90"):
        out[f"{q}_ttft"] = _get(rm, "ttft_s", q)
        out[f"{q}_e2el"] = _get(rm, "e2el_s", q)
        out[f"{q}_itl"] = _get(rm, "itl_s", q)
        out[f"{q}_intvty"] = _get(rm, "interactivity_tok_s", q)
        out[f"{q}_e2e_norm_intvty"] = _get(rm, "e2e_normalized_interactivity_tok_s", q)
    hardware = (result.get("identity") or {}).get("hardware")
    cost = gpu_cost(hardware) if per_gpu and hardware else None
    if cost is not None:
        for basis in COST_BASES:
            out[f"tok_per_usd_{basis}"] = per_gpu * 3600 / cost[basis]
        out["tok_s_per_mw"] = per_gpu * 1000 / cost["kw"]
    req = result.get("requests") or {}
    if req.get("profiled"):
        out["error_rate"] = (req["profiled"] - (req.get("succeeded") or 0)) / req["profiled"]
    power = result.get("power") or {}
    if power.get("valid"):  # measured figures only where the measurement is valid (SPEC §3 "Power")
        out.update({"joules_per_output_token": power.get("joules_per_output_token"),
                    "joules_per_total_token": power.get("joules_per_total_token"),
                    "avg_power_w": power.get("avg_w"), "peak_power_w": power.get("peak_w"),
                    "measured_tok_s_per_mw": power.get("total_tok_s_per_mw")})
    assert set(out) <= set(METRIC_COLUMNS)
    return out


def insert_point(conn: Connection, labels: dict, row: dict, blobs: dict[str, dict]) -> int:
    """One point (a finished or failed run) with its blobs; returns its id."""
    row = {**row, "deployment_id": deployment_id(conn, labels), "imported_at": now()}
    point = conn.execute(points.insert().values(**row)).inserted_primary_key[0]
    if blobs:
        conn.execute(point_blobs.insert(), [{"point_id": point, "kind": kind, "version": blob.get("version", 1),
                                             "data": pack(blob)} for kind, blob in blobs.items()])
    return point


def strict_json(obj) -> str:
    """Standard JSON (a non-finite number, which validated input has none of, becomes null)."""
    return msgspec.json.encode(obj).decode()


def point_row(result: dict, run_id: str, source: str, **extra) -> dict:
    identity = result.get("identity") or {}
    req = result.get("requests") or {}
    validity = result.get("validity") or {}
    return {
        "run_id": run_id, "source": source, "status": "ok", "concurrency": identity.get("concurrency"),
        "started_at": _get(result, "provenance", "start_time"), "valid": validity.get("valid"),
        "simulated": str(identity.get("engine") or "").startswith("agentx-sim"),
        "requests_ok": req.get("succeeded"), "requests_failed": sum((req.get("errors") or {}).values()),
        "power_valid": bool((result.get("power") or {}).get("valid")),
        "settings": strict_json(identity), "result": strict_json(result), **metric_columns(result), **extra,
    }
