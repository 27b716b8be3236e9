"""The simulated engine's /metrics: Prometheus text with vLLM's v1 metric names, and the modeled
power of its GPUs under DCGM exporter's names (`engine/power.py`).

Values are read from the engine's own counters at scrape time (nothing is counted twice on the
hot path); latency histograms are observed by the server in wall-clock seconds.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import cache

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from agentx.engine.window import kv_usage

# vLLM's buckets
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
# the sim's own lag (a token written minus when it was due, modeled seconds): 0 is on time
LAG_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self.counts[bisect_left(self.buckets, value)] += count
        self.sum += value * count

    def family(self, name: str, doc: str, labels: dict) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=list(labels))
        cumulative, pairs = 0, []
        for bound, n in zip(self.buckets, self.counts):
            cumulative += n
            pairs.append((repr(float(bound)), cumulative))
        pairs.append(("+Inf", cumulative + self.counts[-1]))
        fam.add_metric(list(labels.values()), pairs, self.sum)
        return fam


class ServerStats:
    """What the HTTP layer observes (the engine core counts the rest)."""

    def __init__(self):
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.queue = Histogram(E2E_BUCKETS)
        self.lag = Histogram(LAG_BUCKETS)
        self.stalls = None  # the HTTP server's LoopWatch (engine/stalls.py); virtual time has none
        self.restarts = 0  # times the modeled schedule restarted (over 1 s behind: CPU-bound)
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.errors: dict[str, int] = {}


def engine_series(core, labels: dict) -> list[tuple]:
    """(kind, name, doc, labels, value) of one engine core's gauges and counters."""
    kv, src = core.kv, core.sources
    c = kv.counters
    out = [
        ("gauge", "vllm:num_requests_running", "Requests in model execution batches.", labels, len(core.running)),
        ("gauge", "vllm:num_requests_waiting", "Requests waiting to be processed.", labels, len(core.waiting)),
        ("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, kv_usage(core)),
        *([("gauge", "vllm:cpu_cache_usage_perc", "CPU (offload tier) KV-cache usage. 1 means 100 percent usage.",
            labels, len(kv.cpu) / kv.cpu_blocks)] if kv.cpu_blocks else []),
        ("gauge", "vllm:cache_config_info", "Information of the KV cache config.",
         {**{k: v for k, v in labels.items() if k == "replica"}, "block_size": str(kv.block_size),
          "num_gpu_blocks": str(kv.num_blocks), "num_cpu_blocks": str(kv.cpu_blocks)}, 1),
        ("counter", "vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", labels, c.gpu_queries),
        ("counter", "vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", labels, c.gpu_hits),
        ("counter", "vllm:external_prefix_cache_queries", "External (CPU) prefix cache queries, in tokens.", labels,
         c.external_queries),
        ("counter", "vllm:external_prefix_cache_hits", "External (CPU) prefix cache hits, in tokens.", labels,
         c.external_hits),
        ("counter", "vllm:prompt_tokens", "Prefill tokens processed.", labels,
         src.local_compute + src.local_cache_hit + src.external_kv_transfer),
        ("counter", "vllm:prompt_tokens_cached", "Cached prompt tokens (local and external).", labels,
         src.local_cache_hit + src.external_kv_transfer),
    ]
    for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
        out.append(("counter", "vllm:prompt_tokens_by_source", "Prompt tokens by source.",
                    {**labels, "source": source}, getattr(src, source)))
    out += [
        ("counter", "vllm:generation_tokens", "Generation tokens processed.", labels, core.generation_tokens),
        ("counter", "vllm:num_preemptions", "Cumulative number of preemptions.", labels, core.preemptions),
    ]
    block_bytes = kv.block_size * core.roofline.kv_bytes_per_token * core.cfg.gpus
    host_s = block_bytes / core.roofline.host_bw
    moves = [("GPU_to_CPU", c.offload_blocks, c.offload_blocks * host_s), ("CPU_to_GPU", c.load_blocks, c.load_blocks * host_s)]
    ssd = kv.tiers.ssd
    if ssd is not None:  # the SSD tier's writes (from DRAM) and reads (promotions to DRAM)
        moves += [("CPU_to_SSD", ssd.counters.written_blocks, ssd.counters.write_s),
                  ("SSD_to_CPU", ssd.counters.read_blocks, ssd.counters.read_blocks * ssd.read_s_per_block)]
    for kind, blocks, seconds in moves:
        moved = {**labels, "transfer_type": kind}
        out.append(("counter", "vllm:kv_offload_total_bytes", "KV bytes moved between GPU and CPU (and CPU and SSD).",
                    moved, blocks * block_bytes))
        out.append(("counter", "vllm:kv_offload_total_time", "Seconds of link time those moves take.", moved, seconds))
    return out + tier_series(kv, labels, block_bytes) + _policy_series(core, labels)


def tier_series(kv, labels: dict, block_bytes: float) -> list[tuple]:
    """Hits by tier (HBM, DRAM, SSD), and what the store path's rules kept from being written
    (`engine/tiers.py`; SPEC §6 "Offload tiers and the store path")."""
    c, tiers = kv.counters, kv.tiers
    hits = {"HBM": c.gpu_hits}
    if tiers:
        hits["DRAM"] = c.external_hits - c.ssd_hits
    if tiers.ssd is not None:
        hits["SSD"] = c.ssd_hits
    out = [("counter", "agentx_sim:prefix_cache_hits_by_tier", "Prefix cache hits by the tier that held them, in "
            "tokens.", {**labels, "tier": tier}, tokens) for tier, tokens in hits.items()]
    if not tiers:
        return out
    out.append(("gauge", "agentx_sim:kv_store_rules", "1 when the store path's rules are on (only new blocks, one "
                "copy per tier, no repeat in flight).", labels, int(tiers.rules)))
    if tiers.ssd is not None:
        out.append(("gauge", "agentx_sim:ssd_cache_usage_perc", "SSD tier KV usage. 1 means 100 percent usage.",
                    labels, len(tiers.ssd) / tiers.ssd.capacity))
    for tier in tiers.all:
        for rule, blocks in tier.counters.skipped.items():
            out.append(("counter", "agentx_sim:kv_store_skipped_bytes", "KV bytes the store path's rules did not "
                        "write, by tier and rule (not_new, stored, in_flight).",
                        {**labels, "tier": tier.name, "rule": rule}, blocks * block_bytes))
    return out


def _policy_series(core, labels: dict) -> list[tuple]:
    """The hybrid-attention window (engine/hybrid.py) and prefetch (engine/prefetch.py) counters."""
    out = []
    if core.hybrid:
        w = core.hybrid.counters
        out += [
            ("counter", "agentx_sim:window_full_hit_tokens", "Prompt tokens the full-attention layers held at "
             "admission (hybrid attention).", labels, w.full_hit_tokens),
            ("counter", "agentx_sim:window_usable_hit_tokens", "Of them, resumable: window state held at the "
             "boundary.", labels, w.usable_hit_tokens),
            ("counter", "agentx_sim:window_checkpoints", "Window states retained (sparse checkpoints).", labels,
             w.checkpoints),
            ("counter", "agentx_sim:window_checkpoint_evictions", "Window states dropped from the store (LRU).",
             labels, w.checkpoint_evictions),
        ]
    if core.prefetcher:
        p = core.prefetcher.counters
        for trigger, blocks in (("fork", p.fork_blocks), ("join", p.join_blocks)):
            out.append(("counter", "agentx_sim:kv_prefetch_blocks", "KV blocks copied from DRAM to HBM ahead of use.",
                        {**labels, "trigger": trigger}, blocks))
        out.append(("counter", "agentx_sim:kv_prefetch_wait_seconds", "Modeled seconds first iterations waited for "
                    "prefetches in flight.", labels, p.waited_s))
    return out


HISTOGRAMS = (("ttft", "vllm:time_to_first_token_seconds", "Time to first token in seconds."),
              ("itl", "vllm:inter_token_latency_seconds", "Inter-token latency in seconds."),
              ("e2e", "vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds."),
              ("queue", "vllm:request_queue_time_seconds", "Time in the waiting queue in seconds."),
              ("lag", "agentx_sim:token_lag_seconds",
               "Modeled seconds a token was written after the modeled time it was due (the sim's own lag)."))


def server_series(stats: ServerStats, labels: dict) -> list[tuple]:
    """(kind, name, doc, labels, value) of what the HTTP layer counts (histograms: kind
    "histogram", value the Histogram)."""
    out = [("counter", "vllm:request_success", "Finished requests by reason.", {**labels, "finished_reason": k}, v)
           for k, v in stats.success.items()]
    out += [("counter", "vllm:request_errors", "Requests answered with an error, by kind.", {**labels, "kind": k}, v)
            for k, v in stats.errors.items()]
    out += [("histogram", name, doc, labels, getattr(stats, attr)) for attr, name, doc in HISTOGRAMS]
    out.append(("counter", "agentx_sim:schedule_restarts", "Times the modeled schedule restarted from now "
                "(over 1 s of wall time behind); the skipped modeled time counts as lag.", labels, stats.restarts))
    if stats.stalls is not None:
        out += stats.stalls.series(labels)
    return out


def all_series(core, stats: ServerStats, model_name: str) -> list[tuple]:
    """One core's series, or every replica's of a `Replicas` (labels `engine` and `replica` =
    its index, as vLLM labels data-parallel ranks), then the server's once."""
    base = {"engine": "0", "model_name": model_name}
    cores = getattr(core, "cores", None)
    roles = getattr(core, "roles", None)  # disaggregated: each core's worker group (label `worker`)
    if cores is None or len(cores) == 1:
        out = engine_series(cores[0] if cores else core, base)
    elif roles is None:
        out = [row for i, c in enumerate(cores)
               for row in engine_series(c, {"engine": str(i), "model_name": model_name, "replica": str(i)})]
    else:
        out = []
        for i, c in enumerate(cores):
            labels = {"engine": str(i), "model_name": model_name, "replica": str(i), "worker": roles[i]}
            out += engine_series(c, labels) + core.series(i, labels)
    return out + server_series(stats, base)


class Collector:
    def __init__(self, core, stats: ServerStats, model_name: str):
        self.args = (core, stats, model_name)

    def collect(self):
        families = {}
        for kind, name, doc, labels, value in all_series(*self.args):
            if kind == "histogram":
                yield value.family(name, doc, labels)
                continue
            fam = families.get(name)
            if fam is None:
                cls = GaugeMetricFamily if kind == "gauge" else CounterMetricFamily
                fam = families[name] = cls(name, doc, labels=list(labels))
            fam.add_metric(list(labels.values()), value)
        yield from families.values()


# DCGM exporter's fields (its etc/default-counters.csv): name, type, help
DCGM_FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
)


def dcgm_series(core, now: float) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every modeled GPU at modeled time `now`: replica r's GPUs are
    numbered after the GPUs of the replicas before it, each drawing its group's power (TP splits
    work evenly)."""
    cores = getattr(core, "cores", None) or [core]
    if not cores[0].power.known:
        return []
    out = []
    labels = _gpu_labels(sum(c.cfg.gpus for c in cores), cores[0].roofline.hw.name)
    first = 0
    for c in cores:
        util, watts, joules = c.power.reading(now)
        for gpu in labels[first : first + c.cfg.gpus]:
            out += [("DCGM_FI_DEV_GPU_UTIL", gpu, round(util * 100)), ("DCGM_FI_DEV_POWER_USAGE", gpu, watts),
                    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu, joules * 1000)]
        first += c.cfg.gpus
    return out


def gpu_power(core, now: float) -> list[tuple[str, float, float]]:
    """(gpu, watts, mJ) of every modeled GPU at modeled time `now`: `dcgm_series`' power and energy
    values, without its rows (the virtual runner reads them every modeled second)."""
    cores = getattr(core, "cores", None) or [core]
    if not cores[0].power.known:
        return []
    out: list[tuple[str, float, float]] = []
    labels = _gpu_labels(sum(c.cfg.gpus for c in cores), cores[0].roofline.hw.name)
    first = 0
    for c in cores:
        _, watts, joules = c.power.reading(now)
        mj = joules * 1000
        out += [(gpu["gpu"], watts, mj) for gpu in labels[first : first + c.cfg.gpus]]
        first += c.cfg.gpus
    return out


@cache
def _gpu_labels(gpus: int, model_name: str) -> tuple[dict, ...]:
    return tuple({"gpu": str(i), "UUID": f"GPU-agentx-sim-{i:04d}", "device": f"nvidia{i}", "modelName": model_name}
                 for i in range(gpus))


def _dcgm_text(series: list[tuple[str, dict, float]]) -> bytes:
    lines = []
    for name, kind, doc in DCGM_FIELDS:
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in labels.items())}}} {value!r}"
                  for n, labels, value in series if n == name]
    return ("\n".join(lines) + "\n").encode() if series else b""


def exposition(core, stats: ServerStats, model_name: str, now: float = 0.0) -> bytes:
    """Prometheus text of one core, or of every replica of a `Replicas` (label `replica`), then
    the modeled GPUs' DCGM series at modeled time `now`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(core, stats, model_name))
    return generate_latest(registry) + _dcgm_text(dcgm_series(core, now))


def samples(core, stats: ServerStats, model_name: str) -> dict[str, float]:
    """What a scrape of `exposition()` parses into (`metrics.scrape.parse_samples`), without the
    text and the DCGM series (the virtual-time runner samples every modeled second, and writes the
    power readings to power.jsonl of their own)."""
    out = {}
    for kind, name, _, labels, value in all_series(core, stats, model_name):
        ident = (kind, name, *labels.items())
        keys = _SAMPLE_KEYS.get(ident) or _SAMPLE_KEYS.setdefault(ident, _sample_keys(kind, name, labels))
        if kind == "histogram":
            out[keys[0]] = float(sum(value.counts))
            out[keys[1]] = float(value.sum)
        else:
            out[keys[0]] = float(value)
    return out


_SAMPLE_KEYS: dict[tuple, tuple[str, ...]] = {}  # (kind, name, labels...) -> the sample names (sampled every second)


def _sample_keys(kind: str, name: str, labels: dict) -> tuple[str, ...]:
    key = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    if kind == "histogram":
        return f"{name}_count{{{key}}}", f"{name}_sum{{{key}}}"
    return (f"{name}_total{{{key}}}" if kind == "counter" else f"{name}{{{key}}}",)
