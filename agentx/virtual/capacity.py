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
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agentx.engine.config import Deployment, EngineConfig
from agentx.errors import AgentxError
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT, confidence, interval_widths
from agentx.replay.hints import HintLevel
from agentx.replay.plan import PlanConfig

GRID_KEYS = ("hardware", "gpus", "kv_memory", "cpu_offload_gb", "replicas", "router", "spec_decode", "engine",
             "parallelism", "kv_policy", "hints", "window_retention", "ssd_drives", "store_rules", "prefill", "decode",
             "decode_gpus", "decode_parallelism", "prefill_route")
# a grid key left out takes the engine's declared default (`kv_memory` is gpu_memory_utilization)
DEFAULTS = {"hardware": [EngineConfig.hardware], "gpus": [EngineConfig.gpus], "kv_memory": [EngineConfig.gpu_memory_utilization],
            "cpu_offload_gb": [int(EngineConfig.cpu_offload_gb)], "replicas": [Deployment.replicas],
            "router": [Deployment.router], "spec_decode": ["none"], "engine": [EngineConfig.engine],
            "parallelism": [EngineConfig.parallelism], "kv_policy": [EngineConfig.kv_policy], "hints": ["none"],
            "window_retention": [EngineConfig.window_retention],
            "ssd_drives": [EngineConfig.ssd_drives], "store_rules": [EngineConfig.store_rules],
            "prefill": [Deployment.prefill], "decode": [Deployment.decode], "decode_gpus": [Deployment.decode_gpus],
            "decode_parallelism": [Deployment.decode_parallelism], "prefill_route": [Deployment.prefill_route]}
DISAGG_KEYS = ("prefill", "decode", "decode_gpus", "decode_parallelism", "prefill_route")


@dataclass(frozen=True)
class Plan:
    concurrency: tuple[int, ...]
    configs: tuple[dict, ...]  # one per combination of GRID_KEYS
    traces: tuple[str, ...] = ()
    max_context: str | None = None
    duration: float = 600.0
    seed: int = 0
    warmup_requests_per_lane: int = PlanConfig.warmup_requests_per_lane
    model: str = EngineConfig.model
    precision: str = EngineConfig.precision
    cost_basis: str = "neocloud"
    drain: bool = False  # bench --drain: the load stays on until every profiled request has ended (SPEC section 3)
    agreement: float = 0.0  # bench --agreement: the spread rule's target (0: none, the default; SPEC section 3)
    spread_limit: float = ANSWER_SPREAD_LIMIT  # a point whose TTFT interval is wider answers nothing (0: no bound)
    scenario: str | None = None  # ISL:OSL or an alias, instead of traces
    range_ratio: float | None = None
    slo: dict = field(default_factory=lambda: {"p90_e2e_normalized_interactivity": 20.0, "p90_ttft_s": 5.0})


def load_plan(path: Path) -> Plan:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise AgentxError(f"{path}: cannot read the plan ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("grid"), dict):
        raise AgentxError(f"{path}: a plan is a mapping with a `grid` mapping")
    grid = data["grid"]
    unknown = set(grid) - set(GRID_KEYS) - {"concurrency"}
    if unknown:
        raise AgentxError(f"{path}: grid: unknown keys {', '.join(sorted(unknown))} (known: concurrency, "
                          f"{', '.join(GRID_KEYS)})")
    levels = grid.get("concurrency")
    if not isinstance(levels, list) or not levels or not all(isinstance(c, int) and c >= 1 for c in levels):
        raise AgentxError(f"{path}: grid.concurrency must be a list of positive integers")
    axes = []
    for key in GRID_KEYS:
        values = grid.get(key, DEFAULTS[key])
        if not isinstance(values, list) or not values:
            raise AgentxError(f"{path}: grid.{key} must be a non-empty list")
        axes.append(values)
    configs = tuple(_disaggregation_apart(dict(zip(GRID_KEYS, combo))) for combo in itertools.product(*axes))
    configs = tuple({repr(c): c for c in configs}.values())  # (decode axes collapse where prefill is 0)
    slo = data.get("slo", {})
    known = {"traces", "max_context", "duration", "seed", "warmup_requests_per_lane", "model", "precision",
             "cost_basis", "agreement", "slo", "grid", "scenario", "range_ratio", "drain", "spread_limit"}
    if set(data) - known:
        raise AgentxError(f"{path}: unknown keys {', '.join(sorted(set(data) - known))}")
    options = {k: data[k] for k in ("max_context", "duration", "seed", "warmup_requests_per_lane", "model",
                                    "precision", "cost_basis", "agreement", "scenario", "range_ratio", "drain",
                                    "spread_limit") if k in data}
    if not isinstance(options.get("drain", False), bool):
        raise AgentxError(f"{path}: drain: want true or false, got {options['drain']!r}")
    limit = options.get("spread_limit", 0)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= limit <= 100:
        raise AgentxError(f"{path}: spread_limit: want a number in [0, 100] (0: no bound), got {limit!r}")
    if "scenario" in options:
        from agentx.replay.scenarios import parse_scenario

        try:
            parse_scenario(str(options["scenario"]), options.get("range_ratio"))
        except AgentxError as e:
            raise AgentxError(f"{path}: {e}") from None
    plan = Plan(concurrency=tuple(sorted(set(levels))), configs=configs,
                traces=tuple(str(Path(path).parent / t) for t in data.get("traces", [])), **options)
    if slo:
        plan = Plan(**{**plan.__dict__, "slo": {**plan.slo, **slo}})
    for config in configs:
        check_config(plan, config)  # bad settings fail before any run starts
    return plan


def plan_settings(plan: Plan) -> dict:
    """What every point of the plan shares (all but the grid and the SLO)."""
    return {k: v for k, v in plan.__dict__.items() if k not in ("concurrency", "configs", "slo")}


def spec_fields(spec) -> dict:
    if spec in (None, "none", "off"):
        return {}
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


def deployment(plan: Plan, config: dict) -> Deployment:
    """The simulated deployment of one configuration."""
    return Deployment(engine_config(plan, config), int(config["replicas"]), str(config["router"]),
                      prefill=int(config["prefill"]), decode=int(config["decode"]),
                      decode_gpus=int(config["decode_gpus"]), decode_parallelism=str(config["decode_parallelism"] or ""),
                      prefill_route=str(config["prefill_route"]))


def engine_config(plan: Plan, config: dict):
    engine = EngineConfig(hardware=config["hardware"], gpus=int(config["gpus"]), model=plan.model,
                          precision=plan.precision, gpu_memory_utilization=float(config["kv_memory"]),
                          cpu_offload_gb=float(config["cpu_offload_gb"]), seed=plan.seed,
                          engine=str(config["engine"]), parallelism=str(config["parallelism"]),
                          kv_policy=str(config["kv_policy"]), window_retention=_retention(config),
                          ssd_drives=int(config["ssd_drives"]), store_rules=_flag(config["store_rules"]),
                          **spec_fields(config["spec_decode"]))
    if config["hints"] not in tuple(HintLevel):
        raise AgentxError(f"plan: grid.hints entries are {', '.join(HintLevel)}, got {config['hints']!r}")
    return engine


def check_config(plan: Plan, config: dict) -> None:
    """Bad settings (presets, memory, router, disaggregation) fail before any run starts."""
    from agentx.engine.disagg import workers

    workers(deployment(plan, config))


def _retention(config: dict) -> str:
    """The grid's window_retention (YAML reads a bare `off` as false)."""
    value = config["window_retention"]
    return "off" if value is False else str(value)


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise AgentxError(f"plan: grid.store_rules entries are true or false, got {value!r}")
    return value


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
    if _retention(config) != EngineConfig.window_retention:
        parts.append(f"window-{_retention(config)}")
    if config["ssd_drives"]:
        parts.append(f"ssd{config['ssd_drives']}")
    if config["store_rules"] is not True:
        parts.append("no-store-rules")
    if int(config["prefill"]):
        decode = f"{config['decode_gpus'] or config['gpus']}{config['decode_parallelism'] or config['parallelism']}"
        parts.append(f"pd{config['prefill']}x{config['gpus']}-{config['decode']}x{decode}-{config['prefill_route']}")
    return "_".join(parts)


def run_point(plan: Plan, config: dict, concurrency: int, out: str) -> dict:
    """One virtual run (in whatever process runs it); the figures the answer needs."""
    from agentx.replay.corpus import Corpus
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import sim_bench

    corpus = Corpus(tuple(plan.traces), max_context=plan.max_context,
                    scenario=str(plan.scenario) if plan.scenario else None, range_ratio=plan.range_ratio)
    settings = BenchSettings.build(out=out, url="virtual", concurrency=concurrency, duration=plan.duration, seed=plan.seed,
                                   warmup_requests_per_lane=plan.warmup_requests_per_lane, cost_basis=plan.cost_basis,
                                   agreement=plan.agreement, drain=plan.drain, hints=str(config["hints"]),
                                   **corpus.labels)
    sessions = corpus.sessions(concurrency)
    sim = deployment(plan, config)
    result = sim_bench(settings, sessions, sim, command=f"agentx sim plan ({config_name(config)}, c{concurrency})")
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
