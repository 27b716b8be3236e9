"""The result point of one run (SPEC §3-§4): request metrics from the records, server metrics
from the scraped series, client health and validity, as one versioned JSON."""

from __future__ import annotations

from collections import Counter

import numpy as np

from agentx.common import percentiles
from agentx.engine.presets import gpu_cost
from agentx.metrics.cache import cache_summary
from agentx.metrics.deployment_key import client_words, fit_label
from agentx.metrics.goodput import goodput
from agentx.metrics.hints import hints
from agentx.metrics.identity import merge
from agentx.metrics.server import summarize_server
from agentx.metrics.spread import spread
from agentx.metrics.validity import host_error, twin, validity
from agentx.records import Record

SCHEMA_VERSION = 1
PERCENTILES = (50, 75, 90, 95, 99, 99.9)
LATE_BOUND_MS = 10  # p99 dispatch lateness (wall) over this: the client did not keep the schedule (SPEC section 3)


def distribution(values) -> dict | None:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    p = percentiles(a, PERCENTILES)
    if p is None:
        return None
    out = {f"p{q:g}": v for q, v in zip(PERCENTILES, p)}
    out.update(mean=float(a.mean()), std=float(a.std()), n=int(a.size))
    return out


def inverted(dist: dict | None) -> dict | None:
    """Interactivity from ITL: percentile q of interactivity is 1 / (percentile q of ITL)."""
    if dist is None:
        return None
    return {k: (1.0 / v if v > 0 else None) for k, v in dist.items() if k.startswith("p")}


def request_metrics(ok: list[Record], gpus: int | None, hardware: str | None, cost_basis: str,
                    drained_window: float | None = None) -> dict:
    """`drained_window`: a drained run's window (seconds): its throughput is the window's requests'
    tokens over it (SPEC section 3, "Settled: drain"), not over their span, which the drain's tail
    lengthens without the work sent in it."""
    ttft = [r.ttft for r in ok]
    e2el = [r.end - r.start for r in ok]
    itl = [r.itl for r in ok if r.itl is not None]
    per_token = [(r.end - r.start) / r.output_tokens for r in ok if r.output_tokens >= 1]
    itl_d, norm_d = distribution(itl), distribution(per_token)
    out = {
        "ttft_s": distribution(ttft), "e2el_s": distribution(e2el), "itl_s": itl_d,
        "interactivity_tok_s": inverted(itl_d), "e2e_normalized_interactivity_tok_s": inverted(norm_d),
        "isl": distribution(r.isl if r.isl is not None else r.isl_planned for r in ok),
        "osl": distribution(r.output_tokens for r in ok),
        "reasoning_tokens": distribution(r.reasoning for r in ok),
    }
    if ok:
        window = drained_window or max(r.end for r in ok) - min(r.start for r in ok)
        tin = sum(r.isl if r.isl is not None else r.isl_planned for r in ok)
        tout = sum(r.output_tokens for r in ok)
        tp = {"window_s": window, "input_tok_s": tin / window, "output_tok_s": tout / window,
              "total_tok_s": (tin + tout) / window, "requests_per_s": len(ok) / window}
        if gpus:
            tp.update({f"{k[:-6]}_tok_s_per_gpu": tp[k] / gpus for k in ("input_tok_s", "output_tok_s", "total_tok_s")})
            cost = gpu_cost(hardware) if hardware else None
            if cost is not None:
                kw, price = cost["kw"], cost[cost_basis]
                out_gpu, total_gpu = tp["output_tok_s_per_gpu"], tp["total_tok_s_per_gpu"]
                tp.update({
                    "cost_basis": cost_basis, "usd_per_gpu_hour": price, "kw_per_gpu": kw,
                    "usd_per_m_output_tokens": price / (out_gpu * 3600 / 1e6) if out_gpu else None,
                    "usd_per_m_total_tokens": price / (total_gpu * 3600 / 1e6) if total_gpu else None,
                    "output_tok_s_per_mw": out_gpu * 1000 / kw, "total_tok_s_per_mw": total_gpu * 1000 / kw,
                    "joules_per_output_token": kw * 1000 / out_gpu if out_gpu else None,
                })
        out["throughput"] = tp
        isl_planned = sum(r.isl_planned for r in ok)
        reported = [r for r in ok if r.cached is not None]
        out["cache"] = {
            "theoretical_hit_rate": sum(r.theo_cached for r in ok) / isl_planned if isl_planned else None,
            "measured_hit_rate": (sum(r.cached for r in reported) / sum(r.isl or r.isl_planned for r in reported)
                                  if reported else None),
            "requests_reporting_cached": len(reported),
        }
        with_isl = [r for r in ok if r.isl is not None]
        out["isl_drift_tokens_mean"] = (sum(r.isl - r.isl_planned for r in with_isl) / len(with_isl)
                                        if with_isl else None)
        out["short_responses"] = sum(1 for r in ok if r.output_tokens < r.osl_planned)
    return out


NO_POWER = {"valid": False, "source": None, "reasons": ["no power source (bench --power)"]}


def power_metrics(energy: dict | None, throughput: dict | None) -> dict:
    """The measured power over the profiling window (`energy`: agentx/power/energy.window_energy)
    and what it makes of the throughput: joules per output and per total token = average W /
    tok/s, and tok/s per MW = tok/s x 1e6 / average W (the deployment's tokens over its GPUs'
    measured draw)."""
    p = dict(energy or NO_POWER)
    avg = p.get("avg_w")
    if avg and throughput:
        out_s, total_s = throughput["output_tok_s"], throughput["total_tok_s"]
        p.update({"joules_per_output_token": avg / out_s if out_s else None,
                  "joules_per_total_token": avg / total_s if total_s else None,
                  "output_tok_s_per_mw": out_s * 1e6 / avg, "total_tok_s_per_mw": total_s * 1e6 / avg})
    return p


def session_metrics(trees: list[dict]) -> dict:
    whole = [t for t in trees if t.get("whole") and t["recorded_wall_s"] > 0]
    slowdown = [t["replay_wall_s"] / t["recorded_wall_s"] for t in whole]
    return {"trees_whole": len(whole), "slowdown": distribution(slowdown)}


def client_health(prof: list[Record], client: dict, clock_scale: float) -> dict:
    """Dispatch lateness, client CPU and the verdict: `cpu_bound` (the client's CPU over 90 %: it
    cannot keep up), `late_dispatch` (p99 lateness over 10 ms while the client had CPU to spare:
    its event loop was held, the host woke it late or paused, or kept it off a CPU, see
    `runqueue_wait_percent`), or `ok`."""
    late = [(r.start - r.planned) * 1000 / clock_scale for r in prof]  # wall milliseconds
    d = distribution(late)
    cpu = client.get("cpu_percent")
    verdict = ("cpu_bound" if cpu is not None and cpu > 90 else
               "late_dispatch" if d and d["p99"] > LATE_BOUND_MS else "ok")
    return {"dispatch_lateness_ms": d, "cpu_percent": cpu, "verdict": verdict, "client_bound": verdict != "ok",
            "late_bound_ms": LATE_BOUND_MS,
            "runqueue_wait_percent": client.get("runqueue_wait_percent"), "peak_rss_mb": client.get("peak_rss_mb")}


def identity(settings: dict, run: dict) -> dict:
    """What was measured: the user's labels, and what the server published where the user said
    nothing (`sources` names where each engine field came from)."""
    out = {k: settings.get(k) for k in (
        "hardware", "gpus", "engine", "engine_version", "model", "precision", "parallelism", "spec_decoding",
        "kv_offload", "router", "engine_settings", "concurrency", "dataset", "variant", "seed", "duration", "wire", "token_scale",
        "scenario", "clock_scale", "session_headers", "simulated", "request_rate", "arrival")}
    user = {"engine": settings.get("engine"), "block_size": settings.get("engine_block_size"),
            "precision": settings.get("precision")}
    server = {k: tuple(v) for k, v in (run.get("server_identity") or {}).items()}
    values, sources = merge(user, server)
    label = out.get("engine_settings")
    if label:  # the user's (or a virtual run's) label, and what the server published beside it
        published = values.get("engine_settings")
        values["engine_settings"] = label if not published or published == label else f"{label}; server: {published}"
        sources["engine_settings"] = "user" if values["engine_settings"] == label else f"user and {sources['engine_settings']}"
    client = client_words(settings)  # what the server is sent that changes what it does (SPEC 8)
    if client:
        words = f"client: {', '.join(client)}"
        values["engine_settings"] = f"{values['engine_settings']}; {words}" if values.get("engine_settings") else words
    if values.get("engine_settings"):
        values["engine_settings"] = fit_label(values["engine_settings"])
    out.update(values)
    out["sources"] = sources
    return out


def summarize(records: list[Record], run: dict, series: list[dict], trees: list[dict],
              power: dict | None = None) -> dict:
    """`power`: the window's energy of `bench --power` reads (agentx/power/energy.py), if any."""
    settings = run.get("settings", {})
    prof = [r for r in records if r.phase == "profile"]
    ok = [r for r in prof if r.error is None]
    errors = Counter(r.error for r in prof if r.error and r.error != "cancelled")
    cancelled = sum(1 for r in prof if r.error == "cancelled")
    ident, server = identity(settings, run), summarize_server(series)
    if settings.get("mode") == "schedule":
        ident["concurrency"] = None  # open loop: no lanes, the schedule sets how many are in flight
    if not ident.get("request_rate"):
        ident.pop("arrival", None)
    rm = request_metrics(ok, settings.get("gpus"), settings.get("hardware"), settings.get("cost_basis") or "neocloud",
                         settings.get("duration") if settings.get("drain") else None)
    if ok:
        exact_hits = server.get("counters", {}).get("prefix_hits") if server.get("window") == "exact" else None
        rm["cache"].update(cache_summary(ok, ident.get("block_size"), exact_hits))
    if settings.get("slo"):
        rm["goodput"] = goodput(prof, settings["slo"], rm.get("throughput", {}).get("window_s"), settings.get("gpus"))
    measured = power_metrics(power, rm.get("throughput"))
    if "throughput" in rm:
        rm["throughput"]["power_valid"] = measured["valid"]  # the per-MW figures above are the table's
    health = client_health(prof, run.get("client", {}), settings.get("clock_scale") or 1.0)
    host, ci, tw = host_error(ok), spread(ok), twin(run.get("twin"), rm)
    return {
        "schema_version": SCHEMA_VERSION,
        "identity": ident,
        "requests": {
            "total": len(records), "profiled": len(prof), "succeeded": len(ok),
            "warmup": sum(1 for r in records if r.phase == "warmup"),
            "warmup_errors": sum(1 for r in records if r.phase == "warmup" and r.error),
            "errors": dict(errors), "cancelled": cancelled,
            "drain": sum(1 for r in records if r.phase == "drain"), "drained": bool(settings.get("drain")),
        },
        "request_metrics": rm,
        "sessions": session_metrics(trees),
        "server_metrics": server,
        "power": measured,
        "client_health": health,
        "host_error": host,
        "spread": ci,
        "twin": tw,
        "cache_probe": run.get("cache_probe"),
        "accuracy": run.get("accuracy"),
        "validity": validity(prof, ok, run, health, rm, errors, cancelled, host, ci, tw),
        "hints": [run["stopped"]] if run.get("stopped") else hints(prof, errors, ident, settings),
        "provenance": {k: run.get(k) for k in ("agentx_version", "command", "start_time", "host", "run_id")},
    }
