"""Series of the point detail's over-time charts (SPEC §8, §9): KV usage per engine and of the CPU
tier from a real sim with replicas, and the in-flight unique prompt tokens against a brute-force
union of the replayed sessions' hash-block prefixes."""

import itertools

import numpy as np
import pytest

from agentx.report.overtime import over_time
from agentx.results.importer import chart_blobs
from agentx.results.runfolder import read_run
from agentx.results.series import inflight_tokens
from agentx.traces.digest import dataset_digest
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


def _drawn(fig: dict) -> list[int]:
    return [sum(v is not None for v in trace["y"]) for trace in fig["data"]]


def test_kv_usage_per_replica_and_cpu_tier(replica_run):
    run = read_run(replica_run)
    series = chart_blobs(run)["series"]
    server = series["server"]
    engines, cpu = server["kv_usage_by_engine"], server["cpu_kv_usage_by_engine"]
    assert set(engines) == set(cpu) == {"replica 0", "replica 1"}
    for i, mean in enumerate(server["kv_usage"]):  # the server's usage is the replicas' mean
        if mean is not None:
            assert mean == pytest.approx((engines["replica 0"][i] + engines["replica 1"][i]) / 2, abs=1e-4)
    assert max(v for v in server["cpu_kv_usage"] if v is not None) > 0  # the tier filled (write-through)
    assert all(0 <= v <= 1 for col in [*engines.values(), *cpu.values()] for v in col if v is not None)
    kv = over_time(series)["kv"]
    assert [t["name"] for t in kv["data"]] == ["GPU KV usage % (mean of the engines)", "GPU replica 0 %",
                                               "GPU replica 1 %", "CPU tier KV usage % (mean of the engines)",
                                               "CPU tier replica 0 %", "CPU tier replica 1 %"]
    assert min(_drawn(kv)) > 0 and kv["layout"]["title"]["text"] == "KV cache usage, per engine"
    inflight = over_time(series)["inflight"]
    assert [t["name"] for t in inflight["data"]] == ["sum of ISL", "unique (union of prefixes per tree)"]
    assert min(_drawn(inflight)) > 0


def test_one_engine_without_cpu_tier_says_so(sweep_dir):
    series = chart_blobs(read_run(sweep_dir / "c6"))["series"]
    assert series["server"]["kv_usage_by_engine"] is None and series["server"]["cpu_kv_usage"] is None
    kv = over_time(series)["kv"]
    assert kv["layout"]["title"]["text"] == "KV cache usage (no CPU-tier gauge exposed, one engine)"
    assert [t["name"] for t in kv["data"]] == ["GPU KV usage %"]


def _brute_unique(requests: list[np.ndarray], block: int) -> int:
    """Distinct prefixes (a block is shared only with everything before it) times the block size."""
    return len({tuple(ids[:k].tolist()) for ids in requests for k in range(1, len(ids) + 1)}) * block


def test_inflight_unique_tokens_equal_a_brute_force_union():
    """Every pair and triple of requests of a real session with subagents, in flight together in one
    tree (and a second tree holding the same session: nothing shared across trees)."""
    sessions = load_sessions([WEKA], None)
    session = max(sessions, key=lambda s: sum(1 for _ in s.walk()))
    graph = build_graph(session)
    prefix = dataset_digest([session], [graph])["prefix"]
    nodes = [n for n in range(len(graph.nodes)) if len(graph.nodes[n].request.hash_ids)][:12]
    groups = [g for k in (1, 2, 3) for g in itertools.combinations(nodes, k)]
    block = session.block_size
    cols = {k: [] for k in ("start", "end", "isl_planned", "tree", "node", "session")}
    want_unique, want_total = [], []
    for step, group in enumerate(groups):  # group i is in flight over [i, i + 1) (grid step 1 s)
        for tree in (0, 1):
            for n in group:
                ids = graph.nodes[n].request.hash_ids
                cols["start"].append(step - 0.5 * tree)
                cols["end"].append(step + 0.5)
                cols["isl_planned"].append(len(ids) * block)
                cols["tree"].append(tree)
                cols["node"].append(n)
                cols["session"].append(session.id)
        ids = [graph.nodes[n].request.hash_ids for n in group]
        want_unique.append(2 * _brute_unique(ids, block))
        want_total.append(2 * sum(len(i) for i in ids) * block)
    columns = {k: (v if k == "session" else np.asarray(v, dtype=float if k in ("start", "end") else np.int64))
               for k, v in cols.items()}
    got = inflight_tokens(columns, prefix, 1.0, len(groups))
    assert got["inflight_tokens"] == want_total
    assert got["inflight_unique_tokens"] == want_unique
    assert any(u < t for u, t in zip(want_unique, want_total))  # the groups do share prefixes
    assert inflight_tokens(columns, None, 1.0, len(groups))["inflight_unique_tokens"] is None
