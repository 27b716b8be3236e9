"""Each metric definition of SPEC §3 on a few hand-made records, against hand-computed values."""

import pytest

from agentx.metrics.summary import client_health, distribution, request_metrics, summarize
from agentx.records import Record


def rec(start, ttft, end, osl, isl=100, cached=None, theo=0, planned=None, phase="profile", error=None) -> Record:
    return Record(run="r", lane=0, tree=0, replay=0, session="s", stream=0, stream_kind="main", node=0, phase=phase,
                  planned=start if planned is None else planned, start=start, end=end, isl_planned=isl,
                  osl_planned=osl, theo_cached=theo, ttft=ttft, isl=isl, osl=osl, cached=cached, chunks=osl,
                  error=error)


RECORDS = [
    rec(0.0, 0.5, 2.5, 5, isl=100, cached=50, theo=64),  # ITL (2.5 - 0.5) / 4 = 0.5; E2E per token 0.5
    rec(1.0, 1.0, 4.0, 11, isl=200, cached=100, theo=128),  # ITL 2 / 10 = 0.2; E2E per token 3 / 11
    rec(2.0, 0.2, 3.2, 1, isl=300, theo=256),  # one token: no ITL; E2E per token 1.2; cached not reported
]


def test_percentiles_interpolate_linearly_and_std_is_the_population_one():
    d = distribution([1.0, 2.0, 3.0, 4.0, None])
    assert d["p50"] == 2.5 and d["p75"] == 3.25 and d["p90"] == pytest.approx(3.7)
    assert d["p99.9"] == pytest.approx(3.997) and d["mean"] == 2.5 and d["n"] == 4
    assert d["std"] == pytest.approx(1.118033988749895)  # sqrt(1.25)
    assert distribution([None]) is None


def test_itl_interactivity_and_e2e_normalized_interactivity():
    m = request_metrics(RECORDS, None, None, "neocloud")
    assert m["itl_s"]["n"] == 2 and m["itl_s"]["p50"] == pytest.approx(0.35)  # (0.2 + 0.5) / 2
    assert m["interactivity_tok_s"]["p50"] == pytest.approx(1 / 0.35)
    assert m["interactivity_tok_s"]["p90"] == pytest.approx(1 / 0.47)  # 1 / ITL p90 (0.2 + 0.9 * 0.3)
    # E2E / OSL per request: 0.5, 0.2727, 1.2 -> p50 0.5 -> 2 tok/s
    assert m["e2e_normalized_interactivity_tok_s"]["p50"] == pytest.approx(2.0)
    assert m["ttft_s"]["p50"] == 0.5 and m["e2el_s"]["mean"] == pytest.approx((2.5 + 3.0 + 1.2) / 3)


def test_throughput_cost_and_power_per_gpu():
    tp = request_metrics(RECORDS, 2, "H200", "neocloud")["throughput"]
    # window = last end 4.0 - first start 0.0; input 600, output 17 tokens
    assert tp["window_s"] == 4.0 and tp["input_tok_s"] == 150 and tp["output_tok_s"] == 4.25
    assert tp["total_tok_s"] == 154.25 and tp["requests_per_s"] == 0.75
    assert tp["output_tok_s_per_gpu"] == 2.125 and tp["total_tok_s_per_gpu"] == 77.125
    # H200 neocloud $1.74 / GPU-h, 1.73 kW all-in
    assert tp["usd_per_m_output_tokens"] == pytest.approx(1.74 / (2.125 * 3600 / 1e6))  # $227.45
    assert tp["usd_per_m_total_tokens"] == pytest.approx(1.74 / (77.125 * 3600 / 1e6))
    assert tp["output_tok_s_per_mw"] == pytest.approx(2.125 * 1000 / 1.73)  # 1,228 tok/s per MW
    assert tp["joules_per_output_token"] == pytest.approx(1730 / 2.125)
    hyper = request_metrics(RECORDS, 2, "H200", "hyperscaler")["throughput"]
    assert hyper["usd_per_gpu_hour"] == 1.41 and "usd_per_gpu_hour" not in request_metrics(RECORDS, 2, None, "neocloud")["throughput"]


def test_cache_hit_rates_theoretical_and_measured():
    cache = request_metrics(RECORDS, None, None, "neocloud")["cache"]
    assert cache["theoretical_hit_rate"] == pytest.approx(448 / 600)
    assert cache["measured_hit_rate"] == pytest.approx(150 / 300)  # only the requests that report cached
    assert cache["requests_reporting_cached"] == 2


def test_client_health_lateness_in_wall_ms_and_the_bound_flags():
    late = [rec(1.0, 0.1, 2.0, 2, planned=1.0 - d) for d in (0.0, 0.001, 0.002, 0.040)]
    h = client_health(late, {"cpu_percent": 5.0}, clock_scale=2.0)  # run clock 2x wall: ms halve
    assert h["dispatch_lateness_ms"]["p50"] == pytest.approx(0.75) and h["dispatch_lateness_ms"]["n"] == 4
    assert h["client_bound"]  # p99 ~19.4 ms > 10
    calm = client_health(late[:3], {"cpu_percent": 95.0}, clock_scale=1.0)
    assert calm["client_bound"]  # CPU over 90 %
    assert not client_health(late[:3], {"cpu_percent": 50.0}, 1.0)["client_bound"]


def test_validity_and_accounting():
    failed = [rec(0.0, None, 0.1, 0, error="http_5xx") for _ in range(2)]
    warm = [rec(0.0, 0.1, 0.2, 1, phase="warmup")]
    result = summarize(RECORDS + failed + warm, {"finished": True, "settings": {}}, [], [])
    assert result["requests"] == {"total": 6, "profiled": 5, "succeeded": 3, "warmup": 1, "warmup_errors": 0,
                                  "errors": {"http_5xx": 2}, "cancelled": 0, "drain": 0, "drained": False}
    v = result["validity"]
    assert not v["valid"] and v["reasons"] == ["40% of requests failed (limit 10%)"]
    assert v["low_sample"] and v["sample"] == 3  # 3 successful profiled requests < 30: marked, not invalid
    assert [r["rule"] for r in v["rules"]] == ["failed", "context_overflow", "finished", "succeeded", "cancelled", "client",
                                             "spread"]  # (asked no agreement: stored, passes)
    assert summarize(RECORDS, {"finished": True, "settings": {}}, [], [])["validity"]["valid"]
