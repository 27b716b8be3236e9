"""Engine-block ceilings and cache efficiency on hand-computed records."""

import pytest

from agentx.metrics.cache import cache_summary, engine_ceiling
from tests.metrics.test_definitions import rec


def test_ceiling_rounds_down_to_engine_blocks_and_keeps_the_last_token():
    assert engine_ceiling(1000, 5000, 16) == 992  # 62 blocks of 16
    assert engine_ceiling(1000, 5000, 128) == 896  # vLLM's CPU block
    assert engine_ceiling(5000, 5000, 16) == 4992  # the last token is always computed: 4999 // 16 blocks
    assert engine_ceiling(5000, 5000, 1) == 4999  # llama.cpp: any common prefix but the last token
    assert engine_ceiling(0, 10, 16) == 0 and engine_ceiling(64, 1, 16) == 0


def test_efficiency_is_measured_over_the_engine_ceiling():
    records = [rec(0, 0.1, 1, 2, isl=1000, theo=960, cached=896), rec(0, 0.1, 1, 2, isl=300, theo=256, cached=256)]
    out = cache_summary(records, 128)
    # ceilings: min(896, 896) = 896 and min(256, 256) = 256
    assert out["engine_ceiling_hit_rate"] == pytest.approx(1152 / 1300)
    assert out["cache_efficiency"] == 1.0 and out["cache_efficiency_source"] == "usage"
    evicted = [rec(0, 0.1, 1, 2, isl=1000, theo=960, cached=0), records[1]]
    assert cache_summary(evicted, 128)["cache_efficiency"] == pytest.approx(256 / 1152)


def test_server_hits_stand_in_when_answers_do_not_report_cached():
    records = [rec(0, 0.1, 1, 2, isl=1000, theo=960), rec(0, 0.1, 1, 2, isl=300, theo=256, cached=256)]
    assert cache_summary(records, 16, server_hits=1200.0) == {
        "engine_block_size": 16, "engine_ceiling_hit_rate": pytest.approx(1216 / 1300),  # 960 + 256
        "cache_efficiency": pytest.approx(1200 / 1216), "cache_efficiency_source": "server"}
    assert cache_summary(records, 16) == {"engine_block_size": 16, "engine_ceiling_hit_rate": pytest.approx(1216 / 1300)}
    assert cache_summary(records, None) == {"engine_block_size": None}
