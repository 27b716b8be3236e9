"""The spread over session trees of SPEC section 3 ("Spread"): a seeded cluster bootstrap over session
trees, on the records of real virtual-time runs (the bundled WEKA sessions, and a fixed-length
scenario), and the `spread` validity rule with its reason."""

import msgspec
import numpy as np
import pytest

from agentx.engine.config import Deployment, EngineConfig
from agentx.metrics.spread import resampled_percentiles, spread, tree_counts
from agentx.metrics.summary import summarize
from agentx.metrics.validity import AGREEMENT, MIN_TREES, SPREAD_LIMIT
from agentx.records import Record, read_jsonl
from agentx.replay.scenarios import scenario_sessions
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import sim_bench
from tests.conftest import WEKA, failed_rules

FINISHED = {"finished": True, "settings": {}}


def _run(tmp, name: str, sessions, concurrency: int, duration: float) -> tuple[dict, list[Record]]:
    out = tmp / name
    settings = BenchSettings.build(url="virtual", out=str(out), concurrency=concurrency, duration=duration, seed=0,
                                   warmup_requests_per_lane=2, agreement=AGREEMENT)  # the rule is opt-in
    result = sim_bench(settings, sessions, Deployment(EngineConfig()))
    records = read_jsonl(out / "records.jsonl", Record)
    return result, [r for r in records if r.phase == "profile" and r.error is None]


@pytest.fixture(scope="module")
def agentic(tmp_path_factory):
    """The demo's deployment and traces at 16 lanes for 120 modeled s: ~60 requests of ~15 trees."""
    return _run(tmp_path_factory.mktemp("spread"), "weka", load_sessions([WEKA]), 16, 120.0)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """1k1k at 32 lanes for 600 modeled s: ~900 requests of alike lengths in sessions of 16, ~60 trees."""
    return _run(tmp_path_factory.mktemp("spread"), "1k1k", scenario_sessions("1k1k", 32, 16), 32, 600.0)


def test_a_resample_is_the_percentile_of_whole_trees_drawn_with_replacement(agentic):
    _, ok = agentic
    trees = sorted({r.tree for r in ok})
    tree = np.array([trees.index(r.tree) for r in ok])
    ttft = np.array([r.ttft for r in ok])
    counts = tree_counts(len(trees), resamples=25, seed=3)
    got = resampled_percentiles(ttft, tree, counts, (0, 50, 90, 99, 100))
    for b in range(25):  # every request of a tree as often as its tree was drawn, and no other request
        expanded = np.repeat(ttft, counts[b][tree])
        assert got[:, b] == pytest.approx(np.percentile(expanded, (0, 50, 90, 99, 100)))
    assert (counts.sum(axis=1) == len(trees)).all() and (counts == 0).any()  # some trees left out of a resample


def test_the_interval_is_deterministic_with_its_seed(agentic):
    _, ok = agentic
    assert spread(ok) == spread(ok)
    assert spread(ok, seed=1)["ttft_s"] != spread(ok)["ttft_s"]


def test_a_bimodal_sample_gives_a_wide_interval_a_unimodal_large_one_a_narrow_one(scenario):
    _, ok = scenario
    narrow = spread(ok)
    assert narrow["requests"] >= 600 and narrow["trees"] >= 40
    for q in ("p50", "p90"):
        d = narrow["ttft_s"][q]
        assert d["lo"] <= d["value"] <= d["hi"] and d["width_rel"] < SPREAD_LIMIT
    # the same requests with every other tree 20 s slower: the median falls in the gap between the modes
    slow = {t for i, t in enumerate(sorted({r.tree for r in ok})) if i % 2}
    bimodal = [msgspec.structs.replace(r, ttft=r.ttft + 20.0) if r.tree in slow else r for r in ok]
    wide = spread(bimodal)["ttft_s"]["p50"]
    assert wide["lo"] < 1 and wide["hi"] > 20 and wide["width_rel"] > 10 * SPREAD_LIMIT  # it spans the gap


def test_trees_not_requests_are_the_unit(scenario):
    """A tree-wide offset (its requests alike, as a session's share a prefix): resampling requests
    one by one would call the figure sharper than another run of other trees would find it."""
    _, ok = scenario
    trees = sorted({r.tree for r in ok})
    offset = {t: 0.05 * (i % 5) for i, t in enumerate(trees)}
    shifted = [msgspec.structs.replace(r, ttft=r.ttft + offset[r.tree]) for r in ok]
    by_tree = spread(shifted)["ttft_s"]["p50"]["width_rel"]
    by_request = spread([msgspec.structs.replace(r, tree=i) for i, r in enumerate(shifted)])["ttft_s"]["p50"]["width_rel"]
    assert by_tree > 1.5 * by_request


def test_a_short_agentic_run_fails_the_spread_rule_with_its_reason(agentic):
    result, _ = agentic
    v = result["validity"]
    assert "spread" in failed_rules(result), v
    rule = next(r for r in v["rules"] if r["rule"] == "spread")
    assert rule["bound"] == SPREAD_LIMIT
    reason = next(r for r in v["reasons"] if r.startswith(("spread: TTFT p", "only ")))
    if result["spread"]["trees"] >= MIN_TREES:
        assert rule["figure"] > SPREAD_LIMIT and "95 % interval" in reason and "limit 7.1%" in reason, reason
    assert result["spread"]["ttft_s"]["p50"]["width_rel"] is not None  # stored in result.json


def test_a_long_alike_run_passes_it(scenario):
    result, _ = scenario
    rule = next(r for r in result["validity"]["rules"] if r["rule"] == "spread")
    assert rule["ok"] and rule["figure"] < SPREAD_LIMIT


def test_the_rule_is_opt_in(agentic):
    """Without --agreement the short agentic run's interval is stored and its rule passes."""
    _, ok = agentic
    v = summarize(ok, FINISHED, [], [])["validity"]
    rule = next(r for r in v["rules"] if r["rule"] == "spread")
    assert rule["ok"] and rule["bound"] is None and rule["figure"] > SPREAD_LIMIT


def test_too_few_trees_fail_it_even_when_their_requests_agree(scenario):
    _, ok = scenario
    few = sorted({r.tree for r in ok})[:MIN_TREES - 1]
    asked = {"finished": True, "settings": {"agreement": AGREEMENT}}
    v = summarize([r for r in ok if r.tree in few], asked, [], [])["validity"]
    assert any(r.startswith(f"only {MIN_TREES - 1} session trees in the window") for r in v["reasons"]), v["reasons"]
