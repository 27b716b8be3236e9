"""The report reads only the series rows and power reads its summary looks at, a line at a time
(`metrics/scrape.summary_series`, `power/sampler.read_window_power`): the summary it gives is the
one the whole files give (issue #42: an hour of a 72-GPU sim wrote ~400 MB of series, and reading
it whole doubled the run's memory at its end)."""

import json

from agentx.data import sample_traces
from agentx.engine.config import Deployment, EngineConfig
from agentx.metrics.scrape import read_series, summary_series
from agentx.metrics.server import summarize_server
from agentx.power.energy import window_energy
from agentx.power.sampler import read_power, read_window_power
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import POWER_SOURCE, sim_bench


def test_a_virtual_runs_summary_from_the_kept_rows_is_the_whole_files(tmp_path):
    folder = tmp_path / "run"
    sim_bench(BenchSettings.build(url="virtual", out=str(folder), concurrency=16, duration=120.0, seed=0),
              load_sessions([sample_traces()]), Deployment(EngineConfig(hardware="GB200")))
    series, kept = read_series(folder / "server_metrics.jsonl"), summary_series(folder / "server_metrics.jsonl")
    assert len(kept) == sum(1 for r in series if r["phase"] != "warmup") + 1  # one warmup scrape: the last
    assert summarize_server(kept) == summarize_server(series)
    whole, window = read_power(folder / "power.jsonl"), read_window_power(folder / "power.jsonl")
    assert whole and len(window) < len(whole)
    assert window_energy(window, POWER_SOURCE) == window_energy(whole, POWER_SOURCE)


def _row(t: float, phase: str, hits: float) -> dict:
    return {"t": t, "phase": phase, "samples": {"vllm:prefix_cache_queries_total": 10 * t,
                                                "vllm:prefix_cache_hits_total": hits, "vllm:kv_cache_usage_perc": t}}


def test_the_scrape_before_the_window_is_the_last_at_or_before_its_start_in_file_order(tmp_path):
    # an out-of-order scrape after the window opened still counts as "before" (as read whole)
    rows = [_row(1, "warmup", 1), _row(3, "warmup", 2), _row(2, "warmup", 3), _row(4, "profile", 5),
            _row(2.5, "warmup", 7), _row(6, "profile", 9), _row(7, "drain", 11), _row(8, "drain", 12)]
    path = tmp_path / "server_metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"t": 9, "pha')  # a torn last line
    kept = summary_series(path)
    assert summarize_server(kept) == summarize_server(read_series(path))
    assert summarize_server(kept)["counters"]["prefix_hits"] == 9 - 7
