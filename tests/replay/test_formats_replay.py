"""Every agentic trace format replays against the simulated engine (a real server process)."""

import json

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import ran_but_for_host_timing
from tests.traces.test_agentic_formats import AGENTIC_ROWS, CSV, TRACELAB_ROWS

SPEED = 50


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_each_format_replays_with_bench(tmp_path):
    files = {
        "tracelab": _jsonl(tmp_path / "rounds.jsonl", TRACELAB_ROWS),
        "agentic-mooncake": _jsonl(tmp_path / "agentic.jsonl", AGENTIC_ROWS),
        "trie": _jsonl(tmp_path / "trie.jsonl", [{
            "num_turns": 2, "input_prompt_length": 3000, "assistant_response_length": [40, 30],
            "tool_call_output_length": [500, 200], "tool_call_latency": [0.5, 0.2],
            "final_assistant_response_length": 20, "session_id": "trie-1"}]),
        "rollout": _jsonl(tmp_path / "rollout.jsonl", [
            {"group": "g", "stream": k, "prompt_len": 2000, "out_lens": [30, 30], "obs_lens": [300]} for k in range(2)]),
        "mooncake-delta": _jsonl(tmp_path / "delta.jsonl", [
            {"session_id": "delta-1", "timestamp": 0, "input_length": 1500, "output_length": 20, "hash_ids": [1, 2, 3]},
            {"session_id": "delta-1", "timestamp": 900, "input_length": 400, "output_length": 20, "hash_ids": [4]}]),
    }
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "coding_trace.csv").write_text(CSV)
    sessions = [s for fmt, f in files.items() for s in load_sessions([f], "mooncake-delta" if fmt == "mooncake-delta" else None)]
    sessions += load_sessions([tmp_path / "csv"])
    with sim_server("--speed", str(SPEED)) as url:
        result = bench(BenchSettings.build(url=url, concurrency=4, duration=120, out=str(tmp_path / "run"),
                                           clock_scale=SPEED, warmup=False, grace=10), sessions)
    records = read_records(tmp_path / "run")
    assert records and all(r.error is None for r in records)
    assert all(r.isl == r.isl_planned and r.osl == r.osl_planned for r in records)
    assert {s.id for s in sessions} <= {r.session for r in records}
    assert result["requests"]["errors"] == {} or not any(result["requests"]["errors"].values())


def test_bench_replays_one_provider(tmp_path):
    import subprocess
    import sys

    rounds = _jsonl(tmp_path / "rounds.jsonl", TRACELAB_ROWS)
    with sim_server("--speed", str(SPEED)) as url:
        res = subprocess.run([sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(rounds),
                              "--provider", "codex", "--concurrency", "1", "--duration", "60", "--no-warmup",
                              "--clock-scale", str(SPEED), "--grace", "5", "--out", str(tmp_path / "run")],
                             capture_output=True, text=True, timeout=300)
    assert ran_but_for_host_timing(res.returncode, tmp_path / "run"), res.stderr
    records = read_records(tmp_path / "run")
    assert records and {r.session for r in records} == {"cx-1"}
    assert json.loads((tmp_path / "run" / "result.json").read_text())["identity"]["dataset"].endswith("(codex)")
