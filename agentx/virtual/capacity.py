"""`agentx sim plan PLAN.yaml`: a grid of virtual runs and the capacity answer per configuration.

PLAN.yaml (every key but `grid.concurrency` optional):

    traces: [corpus/]            # default: the bundled real traces
    max_context: 256k            # the variant
    duration: 600                # profiling seconds per point (modeled)
    drain: false                 # keep the load on until the window's requests end (bench --drain)
    seed: 0
    warmup_requests_per_lane: 10
    slo: {p90_e2e_normalized_interactivity: 20, p90_ttft_s: 5}   # tok/s >=, seconds <=
    model: qwen3-235b-a22b
    precision: bf16
    grid:
      concurrency: [1, 2, 4, 8, 16, 32, 64]
      hardware: [H200]
      gpus: [8]
      kv_memory: [0.9]           # gpu_memory_utilization
      cpu_offload_gb: [0]
      replicas: [1]
      router: [round-robin]
      spec_decode: [none, {method: mtp, draft_tokens: 1, acceptance_length: 1.85}]
      engine: [vllm]             # engine profiles (--engine's choices)
      parallelism: [tp]          # tp, tep, dep (attention data-parallel + EP)
      kv_policy: [lru, retain]   # engine/eviction.py (SPEC 6 "KV policies")
      hints: [none, harness]     # what the replay sends them (bench --hints)
      window_retention: [none, sparse]   # hybrid-attention models only (engine/hybrid.py; default off)
      prefill: [0, 1]            # disaggregated: prefill workers (0: replicas, not disaggregated)
      decode: [1]                # decode workers (with prefill > 0)
      decode_gpus: [0]           # GPUs of a decode worker (0: gpus)
      decode_parallelism: [""]   # a decode worker's parallelism ("": parallelism)
      prefill_route: [all, tool] # which prompts prefill on the prefill workers (SPEC 6)
      ssd_drives: [0, 8]         # NVMe drives of an SSD KV tier under DRAM (needs cpu_offload_gb > 0)
      store_rules: [true, false] # the KV store path's rules (SPEC 6 "Offload tiers and the store path")
    cost_basis: neocloud
    scenario: 8k1k               # instead of traces: ISL:OSL or 1k1k / 8k1k / 1k8k
    range_ratio: 0.8             # scenario lengths uniform in [R L, L] (alias default 0.8, ISL:OSL 1)

Every `sim bench` setting (virtual/settings.py: the engine's, the deployment's, the replay's, the
corpus's: offline, scenario, range_ratio, ...) is a key: at the top, every point takes it; in the
grid, a list of values, each an axis (a configuration named with the non-default ones). A value
is typed and bounded as the setting declares it, and an error names the file and the key.

A configuration is one choice of every grid key but concurrency; each (configuration,
concurrency) point is a virtual run kept as a run folder under `--out`. The answer per
configuration is the largest concurrency whose point meets the SLO (p90 E2E-normalized
interactivity >= X and p90 TTFT <= Y, valid run) and its throughput per GPU, per dollar and per
MW, plus the measured hit rate at every concurrency against the KV capacity. Points run in
parallel on local processes, or as Ray tasks with `--ray ADDRESS`; a point's result depends only
on its settings, so both give identical points. The command then stores every point in the
results database (`virtual/plan_points.py`) and draws the plan's HTML report (`report/capacity.py`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agentx.engine.config import Deployment, EngineConfig
from agentx.errors import AgentxError
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT, confidence, interval_widths
from agentx.options import read_settings
from agentx.replay.plan import PlanConfig
from agentx.virtual.settings import SimBench, sim_bench_config, sim_bench_struct, yaml_off

# the grid's axes a configuration always has (a grid key left out takes the engine's declared
# default; `kv_memory` is gpu_memory_utilization, `spec_decode` none or {method, draft_tokens,
# acceptance_length}); every other `sim bench` setting may be an axis too, or set at the top
GRID_KEYS = ("hardware", "gpus", "kv_memory", "cpu_offload_gb", "replicas", "router", "spec_decode", "engine",
             "parallelism", "kv_policy", "hints", "window_retention", "ssd_drives", "store_rules", "prefill", "decode",
             "decode_gpus", "decode_parallelism", "prefill_route")
DEFAULTS = {"hardware": [EngineConfig.hardware], "gpus": [EngineConfig.gpus], "kv_memory": [EngineConfig.gpu_memory_utilization],
            "cpu_offload_gb": [int(EngineConfig.cpu_offload_gb)], "replicas": [Deployment.replicas],
            "router": [Deployment.router], "spec_decode": ["none"], "engine": [EngineConfig.engine],
            "parallelism": [EngineConfig.parallelism], "kv_policy": [EngineConfig.kv_policy], "hints": ["none"],
            "window_retention": [EngineConfig.window_retention],
            "ssd_drives": [EngineConfig.ssd_drives], "store_rules": [EngineConfig.store_rules],
            "prefill": [Deployment.prefill], "decode": [Deployment.decode], "decode_gpus": [Deployment.decode_gpus],
            "decode_parallelism": [Deployment.decode_parallelism], "prefill_route": [Deployment.prefill_route]}
DISAGG_KEYS = ("prefill", "decode", "decode_gpus", "decode_parallelism", "prefill_route")
PLAN_KEYS = ("traces", "slo", "grid", "spread_limit")  # the plan's own; every other key is a `sim bench` setting
# what every point takes unless the plan sets it (a plan's window is shorter than sim bench's hour)
SHARED = {"max_context": None, "duration": 600.0, "seed": 0, "warmup_requests_per_lane": PlanConfig.warmup_requests_per_lane,
          "model": EngineConfig.model, "precision": EngineConfig.precision, "cost_basis": "neocloud", "drain": False,
          "agreement": 0.0, "scenario": None, "range_ratio": None}


@dataclass(frozen=True)
class Plan:
    concurrency: tuple[int, ...]
    configs: tuple[dict, ...]  # one per combination of the grid's axes
    traces: tuple[str, ...] = ()
    shared: dict = field(default_factory=lambda: dict(SHARED))  # the `sim bench` settings every point takes
    spread_limit: float = ANSWER_SPREAD_LIMIT  # a point whose TTFT interval is wider answers nothing (0: no bound)
    slo: dict = field(default_factory=lambda: {"p90_e2e_normalized_interactivity": 20.0, "p90_ttft_s": 5.0})


def load_plan(path: Path) -> Plan:
    """PLAN.yaml, read through the `sim bench` settings' declarations (virtual/settings.py): an
    error is one line naming the file and the key."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise AgentxError(f"{path}: cannot read the plan ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("grid"), dict):
        raise AgentxError(f"{path}: a plan is a mapping with a `grid` mapping")
    top = read_settings(yaml_off({k: v for k, v in data.items() if k not in PLAN_KEYS}), sim_bench_struct(), str(path))
    levels, axes = _axes(path, data["grid"], top)
    configs = tuple(_disaggregation_apart(dict(zip(axes, combo))) for combo in itertools.product(*axes.values()))
    configs = tuple({repr(c): c for c in configs}.values())  # (decode axes collapse where prefill is 0)
    limit = data.get("spread_limit", ANSWER_SPREAD_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= limit <= 100:
        raise AgentxError(f"{path}: spread_limit: want a number in [0, 100] (0: no bound), got {limit!r}")
    slo = data.get("slo") or {}
    plan = Plan(concurrency=tuple(sorted(set(levels))), configs=configs, spread_limit=limit,
                traces=tuple(str(Path(path).parent / t) for t in data.get("traces", [])),
                shared={**SHARED, **{k: v for k, v in top.items() if k not in axes}})
    if slo:
        plan = Plan(**{**plan.__dict__, "slo": {**plan.slo, **slo}})
    for config in configs:
        try:
            check_config(plan, config)  # bad settings fail before any run starts
        except AgentxError as e:
            raise AgentxError(f"{path}: {e}") from None
    return plan


def _axes(path: Path, grid: dict, top: dict) -> tuple[list[int], dict[str, list]]:
    """The grid's concurrency levels and its axes: every GRID_KEYS one (its value at the plan's top,
    or its default, when the grid leaves it out) and any other `sim bench` setting it names."""
    levels = grid.get("concurrency")
    if not isinstance(levels, list) or not levels or not all(isinstance(c, int) and c >= 1 for c in levels):
        raise AgentxError(f"{path}: grid.concurrency must be a list of positive integers")
    own = {k: grid[k] for k in ("kv_memory", "spec_decode") if k in grid}
    for key, values in own.items():
        if not isinstance(values, list) or not values:
            raise AgentxError(f"{path}: grid.{key} must be a non-empty list")
    typed = read_settings(yaml_off({k: v for k, v in grid.items() if k not in ("concurrency", *own)}),
                          sim_bench_struct(listed=True), str(path), "grid.")
    if "gpu_memory_utilization" in typed:  # (the grid's own name for it: kv_memory)
        if "kv_memory" in own:
            raise AgentxError(f"{path}: grid.gpu_memory_utilization: the same as grid.kv_memory: give one")
        own["kv_memory"] = typed.pop("gpu_memory_utilization")
    given = {**typed, **own}
    for key, values in given.items():
        if not values:
            raise AgentxError(f"{path}: grid.{key} must be a non-empty list")
        if key in top:
            raise AgentxError(f"{path}: grid.{key}: also set at the plan's top: give it in one place")
    axes = {k: given.get(k, [top[k]] if k in top else DEFAULTS[k]) for k in GRID_KEYS}
    return levels, {**axes, **{k: v for k, v in given.items() if k not in axes}}


def plan_settings(plan: Plan) -> dict:
    """What every point of the plan shares (all but the grid and the SLO)."""
    return {"traces": plan.traces, **plan.shared, "spread_limit": plan.spread_limit}


def spec_fields(spec) -> dict:
    if spec in (None, "none", "off", False):
        return {}
    if isinstance(spec, str):
        return {"spec_decode": spec}  # (its draft_tokens, acceptance_length: settings of their own)
    if not isinstance(spec, dict) or "method" not in spec:
        raise AgentxError(f"plan: grid.spec_decode entries are 'none' or {{method, draft_tokens, "
                          f"acceptance_length}}, got {spec!r}")
    return {"spec_decode": spec["method"], "draft_tokens": int(spec.get("draft_tokens", 1)),
            "acceptance_length": float(spec.get("acceptance_length", 0.0))}


def _disaggregation_apart(config: dict) -> dict:
    """A configuration without prefill workers takes the disaggregation axes' defaults (one point,
    not one per decode setting); with them, decode defaults to 1 worker."""
    if not int(config["prefill"]):
        return {**config, **{k: DEFAULTS[k][0] for k in DISAGG_KEYS}}
    return {**config, "decode": int(config["decode"]) or 1}


def point(plan: Plan, config: dict, concurrency: int) -> SimBench:
    """One point's `sim bench` run: the plan's shared settings, then the configuration's."""
    if not isinstance(config["kv_memory"], (int, float)) or isinstance(config["kv_memory"], bool):
        raise AgentxError(f"grid.kv_memory: want a number, got {config['kv_memory']!r}")
    values = {k: v for k, v in config.items() if k not in ("kv_memory", "spec_decode")}
    values.update(gpu_memory_utilization=float(config["kv_memory"]), **spec_fields(config["spec_decode"]))
    return sim_bench_config({**plan.shared, **values}, [concurrency], plan.traces)


def deployment(plan: Plan, config: dict) -> Deployment:
    """The simulated deployment of one configuration."""
    return point(plan, config, plan.concurrency[0]).deployment


def check_config(plan: Plan, config: dict) -> None:
    """Bad settings (presets, memory, router, disaggregation) fail before any run starts."""
    from agentx.engine.disagg import workers

    workers(deployment(plan, config))


def config_name(config: dict) -> str:
    spec = spec_fields(config["spec_decode"])
    parts = [f"{config['gpus']}x{config['hardware']}", f"mem{config['kv_memory']:g}",
             f"cpu{config['cpu_offload_gb']:g}", f"r{config['replicas']}-{config['router']}"]
    if spec:
        parts.append(f"{spec['spec_decode']}-k{spec['draft_tokens']}-al{spec['acceptance_length']:g}")
    if config["engine"] != EngineConfig.engine or config["parallelism"] != EngineConfig.parallelism:  # (default names stay)
        parts.append(f"{config['engine']}-{config['parallelism']}")
    if config["kv_policy"] != EngineConfig.kv_policy or config["hints"] != "none":
        parts.append(f"{config['kv_policy']}-hints-{config['hints']}")
    if config["window_retention"] != EngineConfig.window_retention:
        parts.append(f"window-{config['window_retention']}")
    if config["ssd_drives"]:
        parts.append(f"ssd{config['ssd_drives']}")
    if config["store_rules"] is not True:
        parts.append("no-store-rules")
    if int(config["prefill"]):
        decode = f"{config['decode_gpus'] or config['gpus']}{config['decode_parallelism'] or config['parallelism']}"
        parts.append(f"pd{config['prefill']}x{config['gpus']}-{config['decode']}x{decode}-{config['prefill_route']}")
    parts += [f"{k}-{re.sub(r'[^A-Za-z0-9.-]', '-', str(v))}" for k, v in config.items() if k not in GRID_KEYS]
    return "_".join(parts)


def run_point(plan: Plan, config: dict, concurrency: int, out: str) -> dict:
    """One virtual run (in whatever process runs it); the figures the answer needs."""
    from agentx.virtual.runner import sim_bench

    run = point(plan, config, concurrency)
    sessions = run.corpus.sessions(concurrency, per_arrival=run.settings.plan.request_rate is not None)
    result = sim_bench(run.settings.replace(out=out), sessions, run.deployment,
                       command=f"agentx sim plan ({config_name(config)}, c{concurrency})")
    return point_figures(result)


def point_figures(result: dict) -> dict:
    rm, sm = result["request_metrics"], result["server_metrics"]
    tp, cache = rm.get("throughput", {}), rm.get("cache") or {}
    norm, ttft = rm.get("e2e_normalized_interactivity_tok_s") or {}, rm.get("ttft_s") or {}
    price = tp.get("usd_per_gpu_hour")
    per_gpu = tp.get("total_tok_s_per_gpu")
    return {"valid": result["validity"]["valid"], "succeeded": result["requests"]["succeeded"],
            "p90_norm": norm.get("p90"), "p90_ttft": ttft.get("p90"), "p50_ttft": ttft.get("p50"),
            "total_tok_s": tp.get("total_tok_s"), "tok_s_per_gpu": per_gpu,
            "tokens_per_usd": per_gpu * 3600 / price if per_gpu and price else None,
            "tok_s_per_mw": tp.get("total_tok_s_per_mw"),
            "hit_rate": cache.get("measured_hit_rate"), "theoretical_hit_rate": cache.get("theoretical_hit_rate"),
            "server_hit_rate": sm.get("prefix_hit_rate"), "kv_usage_mean": sm.get("kv_usage_mean"),
            "hit_rate_by_tier": sm.get("hit_rate_by_tier"), "kv_written_bytes": sm.get("kv_written_bytes"),
            "isl_mean": (rm.get("isl") or {}).get("mean"), "spread": interval_widths(result.get("spread"))}


def meets(plan: Plan, p: dict) -> bool:
    """The point is valid, confident (its TTFT interval within `plan.spread_limit`: SPEC section 3,
    "Settled: confidence") and meets the SLO."""
    slo = plan.slo
    low = confidence(p.get("spread"), plan.spread_limit)["low"]
    return bool(p["valid"] and not low and p["p90_norm"] is not None and p["p90_ttft"] is not None
                and p["p90_norm"] >= slo["p90_e2e_normalized_interactivity"] and p["p90_ttft"] <= slo["p90_ttft_s"])


def run_plan(plan: Plan, out: Path, ray_address: str | None = None, workers: int | None = None) -> list[dict]:
    """Every point of the grid (in parallel); one answer per configuration."""
    out = Path(out)
    ray = _ray_connect(ray_address) if ray_address else None  # no cluster: one line, before any folder is made
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(config, c, str(out / config_name(config) / f"c{c}")) for config in plan.configs for c in plan.concurrency]
    if ray is not None:
        points = _on_ray(ray, plan, jobs)
    else:
        with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            points = list(pool.map(run_point, *zip(*[(plan, config, c, path) for config, c, path in jobs])))
    answers = []
    for config in plan.configs:
        curve = [(c, p | {"confidence": confidence(p.get("spread"), plan.spread_limit)})
                 for (cfg, c, _), p in zip(jobs, points) if cfg is config]
        ok = [(c, p) for c, p in curve if meets(plan, p)]
        best_c, best = max(ok, key=lambda x: x[0]) if ok else (None, None)
        from agentx.engine.disagg import workers

        cores = workers(deployment(plan, config)).cores
        answers.append({"config": config_name(config), "settings": config, "max_concurrency": best_c,
                        "at_max": best, "kv_capacity_tokens": sum(c.roofline.kv_capacity_tokens for c in cores),
                        "curve": [{"concurrency": c, **p} for c, p in curve]})
    from agentx.virtual.answer_table import winner

    best = winner(answers)
    (out / "plan.json").write_text(json.dumps({"slo": plan.slo, "plan": plan_settings(plan), "answers": answers,
                                               "winner": best["config"] if best else None}, indent=1))
    return answers


def _ray_connect(address: str):
    """The ray module, connected to the cluster at `address` (AgentxError when there is none)."""
    try:
        import ray
    except ImportError:
        raise AgentxError("--ray needs the ray extra: pip install -e '.[ray]'") from None
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:  # no cluster there
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise AgentxError(f"no Ray cluster at {address!r} ({first}); start one with `ray start --head` "
                          "or leave --ray out to run on local processes", "ray") from None
    return ray


def _on_ray(ray, plan: Plan, jobs: list) -> list[dict]:
    try:
        task = ray.remote(run_point)
        return ray.get([task.remote(plan, config, c, path) for config, c, path in jobs])
    finally:
        ray.shutdown()
