"""Engine adapters on pinned, real /metrics samples (samples/README.md says where each is from):
two scrapes, the second with hand-set counter increments, mapped to one vocabulary."""

from pathlib import Path

import pytest

from agentx.metrics.scrape import parse_samples
from agentx.metrics.server import detect_engine, summarize_server

SAMPLES = Path(__file__).parent / "samples"


def scrape(name: str, changes: dict[str, str] | None = None) -> dict:
    """A sample's samples, with lines `old -> new` replaced (a later scrape of the same server)."""
    text = (SAMPLES / name).read_text()
    for old, new in (changes or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    return parse_samples(text)


def series(before: dict, *profile: dict) -> list[dict]:
    rows = [{"t": 0.0, "phase": "warmup", "samples": before}]
    return rows + [{"t": 1.0 + i, "phase": "profile", "samples": s} for i, s in enumerate(profile)]


def test_parse_drops_buckets_and_keys_labels_sorted():
    s = scrape("vllm_v0.txt")
    assert s['vllm:prompt_tokens_total{model_name="Qwen/Qwen3-0.6B"}'] == 43952.0
    assert s['vllm:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-0.6B"}'] == 69.0
    assert not any("_bucket" in k for k in s)
    info = next(k for k in s if k.startswith("vllm:cache_config_info{"))
    assert 'block_size="16"' in info and info.index("block_size") < info.index("cache_dtype")


def test_llamacpp_queries_are_computed_plus_cached():
    before = scrape("llamacpp.txt")
    after = scrape("llamacpp.txt", {
        "llamacpp:prompt_tokens_total 18818": "llamacpp:prompt_tokens_total 19818",  # +1000 computed
        "llamacpp:prompt_tokens_cached_total 18794": "llamacpp:prompt_tokens_cached_total 22794",  # +4000 reused
        "llamacpp:tokens_predicted_total 384": "llamacpp:tokens_predicted_total 484",
        "llamacpp:requests_processing 0": "llamacpp:requests_processing 4",
        "llamacpp:requests_deferred 0": "llamacpp:requests_deferred 2",
    })
    out = summarize_server(series(before, before, after))
    assert out["engine"] == "llama.cpp" and out["scrapes"] == 2
    assert out["counters"]["prefix_queries"] == 5000 and out["counters"]["prefix_hits"] == 4000
    assert out["prefix_hit_rate"] == pytest.approx(0.8)
    assert out["counters"]["generation_tokens"] == 100
    assert out["running_mean"] == 2 and out["running_max"] == 4 and out["waiting_max"] == 2
    assert "prefix_queries" not in out["missing"] and "kv_usage" in out["missing"]


def test_sglang_docs_sample_maps_queue_usage_and_tokens():
    before = scrape("sglang_docs.txt")
    after = scrape("sglang_docs.txt", {
        "sglang:prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 8.128902e+06":
            "sglang:prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 8.138902e+06",
        "sglang:token_usage{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.28":
            "sglang:token_usage{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.36",
    })
    out = summarize_server(series(before, before, after))
    assert detect_engine(series(before)) == "sglang" and out["engine"] == "sglang"
    assert out["counters"]["prompt_tokens"] == pytest.approx(10_000)
    assert out["kv_usage_mean"] == pytest.approx(0.32) and out["kv_usage_max"] == pytest.approx(0.36)
    assert out["running_mean"] == 162 and out["waiting_max"] == 2826
    # this SGLang version has no cached-token counter: the hit rate is missing, not zero
    assert "prefix_hits" in out["missing"] and out.get("prefix_hit_rate") is None


def test_sglang_cached_tokens_by_source_sum_to_hits():
    before = scrape("sglang_docs.txt")
    label = 'sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06'
    grown = label.replace("8.128902e+06", "8.129902e+06")  # +1000 prompt tokens
    cached = ('\nsglang:cached_tokens_total{cache_source="device",model_name="meta-llama/Llama-3.1-8B-Instruct"} 600'
              '\nsglang:cached_tokens_total{cache_source="host",model_name="meta-llama/Llama-3.1-8B-Instruct"} 150')
    zero = cached.replace(" 600", " 0").replace(" 150", " 0")
    out = summarize_server(series(scrape("sglang_docs.txt", {label: label + zero}),
                                  scrape("sglang_docs.txt", {label: grown + cached})))
    assert before and out["counters"]["prefix_hits"] == 750 and out["prefix_hit_rate"] == pytest.approx(0.75)


def test_vllm_v0_names_drift_is_reported_as_missing():
    before = scrape("vllm_v0.txt")
    after = scrape("vllm_v0.txt", {
        'vllm:prompt_tokens_total{model_name="Qwen/Qwen3-0.6B"} 43952.0':
            'vllm:prompt_tokens_total{model_name="Qwen/Qwen3-0.6B"} 45952.0',
        'vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen3-0.6B"} 0.0':
            'vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen3-0.6B"} 0.5',
    })
    out = summarize_server(series(before, after))
    assert out["engine"] == "vllm" and out["counters"]["prompt_tokens"] == 2000
    assert out["kv_usage_max"] == 0.5  # the V0 name of KV usage
    assert {"prefix_queries", "prefix_hits", "prompt_tokens_by_source"} <= set(out["missing"])


def test_no_profile_scrape_says_so():
    out = summarize_server([{"t": 0.0, "phase": "warmup", "samples": scrape("llamacpp.txt")}])
    assert out["scrapes"] == 0 and out["missing"] == ["no scrape inside the profiling window"]
