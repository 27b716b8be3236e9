"""The simulated engine's /metrics: Prometheus text with vLLM's v1 metric names.

Values are read from the engine's own counters at scrape time (nothing is counted twice on the
hot path); latency histograms are observed by the server in wall-clock seconds.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

# vLLM's buckets
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
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
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.errors: dict[str, int] = {}


class EngineCollector:
    """One engine core's series; with replicas, one collector per replica (labels `engine` and
    `replica` = its index, as vLLM labels data-parallel ranks), and the server's histograms once."""

    def __init__(self, core, stats: ServerStats, model_name: str, replica: int | None = None):
        self.core, self.stats = core, stats
        self.labels = {"engine": str(replica or 0), "model_name": model_name}
        if replica is not None:
            self.labels["replica"] = str(replica)

    def collect(self):
        yield from self.engine_families()
        if self.labels["engine"] == "0":
            yield from self.server_families()

    def engine_families(self):
        core, kv, s = self.core, self.core.kv, self.stats
        c, names, values = kv.counters, list(self.labels), list(self.labels.values())

        def gauge(name, doc, value):
            fam = GaugeMetricFamily(name, doc, labels=names)
            fam.add_metric(values, value)
            return fam

        def counter(name, doc, value):
            fam = CounterMetricFamily(name, doc, labels=names)
            fam.add_metric(values, value)
            return fam

        def labelled(name, doc, label, by: dict):
            fam = CounterMetricFamily(name, doc, labels=names + [label])
            for key, v in by.items():
                fam.add_metric(values + [key], v)
            return fam

        yield gauge("vllm:num_requests_running", "Requests in model execution batches.", len(core.running))
        yield gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", len(core.waiting))
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv.usage)
        replica = [k for k in ("replica",) if k in self.labels]
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the KV cache config.",
                                 labels=replica + ["block_size", "num_gpu_blocks", "num_cpu_blocks"])
        info.add_metric([self.labels[k] for k in replica] + [str(kv.block_size), str(kv.num_blocks),
                                                             str(kv.cpu_blocks)], 1)
        yield info
        yield counter("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", c.gpu_queries)
        yield counter("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", c.gpu_hits)
        yield counter("vllm:external_prefix_cache_queries", "External (CPU) prefix cache queries, in tokens.",
                      c.external_queries)
        yield counter("vllm:external_prefix_cache_hits", "External (CPU) prefix cache hits, in tokens.",
                      c.external_hits)
        src = core.sources
        yield counter("vllm:prompt_tokens", "Prefill tokens processed.",
                      src.local_compute + src.local_cache_hit + src.external_kv_transfer)
        yield counter("vllm:prompt_tokens_cached", "Cached prompt tokens (local and external).",
                      src.local_cache_hit + src.external_kv_transfer)
        yield labelled("vllm:prompt_tokens_by_source", "Prompt tokens by source.", "source",
                       {"local_compute": src.local_compute, "local_cache_hit": src.local_cache_hit,
                        "external_kv_transfer": src.external_kv_transfer})
        yield counter("vllm:generation_tokens", "Generation tokens processed.", core.generation_tokens)
        yield counter("vllm:num_preemptions", "Cumulative number of preemptions.", core.preemptions)
        block_bytes = kv.block_size * core.roofline.kv_bytes_per_token * core.cfg.gpus
        moved = {"GPU_to_CPU": c.offload_blocks * block_bytes, "CPU_to_GPU": c.load_blocks * block_bytes}
        yield labelled("vllm:kv_offload_total_bytes", "KV bytes moved between GPU and CPU.", "transfer_type", moved)
        yield labelled("vllm:kv_offload_total_time", "Seconds of host-link time those moves take.", "transfer_type",
                       {k: v / core.roofline.host_bw for k, v in moved.items()})

    def server_families(self):
        s, labels = self.stats, {k: v for k, v in self.labels.items() if k != "replica"}
        names, values = list(labels), list(labels.values())

        def labelled(name, doc, label, by: dict):
            fam = CounterMetricFamily(name, doc, labels=names + [label])
            for key, v in by.items():
                fam.add_metric(values + [key], v)
            return fam

        yield labelled("vllm:request_success", "Finished requests by reason.", "finished_reason", s.success)
        if s.errors:
            yield labelled("vllm:request_errors", "Requests answered with an error, by kind.", "kind", s.errors)
        yield s.ttft.family("vllm:time_to_first_token_seconds", "Time to first token in seconds.", labels)
        yield s.itl.family("vllm:inter_token_latency_seconds", "Inter-token latency in seconds.", labels)
        yield s.e2e.family("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", labels)
        yield s.queue.family("vllm:request_queue_time_seconds", "Time in the waiting queue in seconds.", labels)


class ReplicasCollector:
    """Every replica's families merged by name (Prometheus text wants one family per name)."""

    def __init__(self, cores: list, stats: ServerStats, model_name: str):
        self.parts = [EngineCollector(core, stats, model_name, i) for i, core in enumerate(cores)]

    def collect(self):
        merged = {}
        for part in self.parts:
            for fam in part.collect():
                if fam.name in merged:
                    merged[fam.name].samples.extend(fam.samples)
                else:
                    merged[fam.name] = fam
        yield from merged.values()


def collector(core, stats: ServerStats, model_name: str):
    """The collector of one core, or of every replica of a `Replicas` (label `replica`)."""
    cores = getattr(core, "cores", None)
    if cores is not None and len(cores) > 1:
        return ReplicasCollector(cores, stats, model_name)
    return EngineCollector(cores[0] if cores else core, stats, model_name)


def exposition(core, stats: ServerStats, model_name: str) -> bytes:
    """Prometheus text of one core, or of every replica (label `replica`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector(core, stats, model_name))
    return generate_latest(registry)


def samples(core, stats: ServerStats, model_name: str) -> dict[str, float]:
    """What a scrape of `exposition()` parses into (`metrics.scrape.parse_samples`), built from
    the families directly (the virtual-time runner samples every modeled second)."""
    out = {}
    for family in collector(core, stats, model_name).collect():
        for s in family.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
    return out
