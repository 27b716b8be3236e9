"""What a point shows beside its figures so a reader can trust it (SPEC section 4, issue #24):
its provenance and the diagnosis figures of its result point. Shared by the point page and the
REST API."""

from __future__ import annotations


def provenance(result: dict) -> dict:
    """Where the point came from: the exact command (or recipe), agentx version, run id, host, start
    time, and the target's identity with the source of each field (user flag or server endpoint)."""
    prov, ident = result.get("provenance") or {}, result.get("identity") or {}
    target = {k: ident.get(k) for k in ("engine", "engine_version", "model", "hardware", "gpus", "precision",
                                        "parallelism", "router", "engine_settings", "block_size", "max_model_len")
              if ident.get(k) is not None}
    return {"command": prov.get("command") or None, "agentx_version": prov.get("agentx_version"),
            "run_id": prov.get("run_id"), "host": prov.get("host"), "start_time": prov.get("start_time"),
            "target": target, "sources": ident.get("sources") or {}}


def diagnosis(result: dict) -> dict:
    """The figures that say how far to trust the point: preemptions, cache efficiency, the
    client's verdict, the host error (agentx-sim), low sample, the spread of TTFT over session trees,
    and `bench --eval`'s accuracy with its reference (SPEC section 3, "Accuracy")."""
    sm, health, v = result.get("server_metrics") or {}, result.get("client_health") or {}, result.get("validity") or {}
    cache = (result.get("request_metrics") or {}).get("cache") or {}
    host = result.get("host_error") or {}
    ttft_ci = (result.get("spread") or {}).get("ttft_s") or {}
    width = lambda q: (ttft_ci.get(q) or {}).get("width_rel")  # noqa: E731
    return {"preemptions": (sm.get("counters") or {}).get("preemptions"),
            "cache_efficiency": cache.get("cache_efficiency"),
            "client_verdict": health.get("verdict"), "client_bound": health.get("client_bound"),
            "dispatch_lateness_p99_ms": (health.get("dispatch_lateness_ms") or {}).get("p99"),
            "host_error_ttft_p50_s": (host.get("ttft_s") or {}).get("p50"),
            "host_error_itl_p50_s": (host.get("itl_s") or {}).get("p50"),
            "low_sample": v.get("low_sample"), "sample": v.get("sample"),
            "spread_trees": (result.get("spread") or {}).get("trees"),
            "spread_ttft_p50_width": width("p50"), "spread_ttft_p90_width": width("p90"),
            **_accuracy(result.get("accuracy"))}


def _accuracy(acc: dict | None) -> dict:
    if not acc:
        return {"accuracy": None}
    return {"accuracy": acc.get("accuracy"), "accuracy_eval": f"{acc.get('eval')} {acc.get('correct')}/{acc.get('n')}",
            "accuracy_interval_high": (acc.get("interval") or [None, None])[1], "accuracy_reference": acc.get("reference")}
