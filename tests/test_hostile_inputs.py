"""Hostile trace input through the `agentx` command (issue #12): `trace stats`, `trace convert`
and `bench` against the simulated engine; every input is either accepted (exit 0, a valid run)
or rejected with one line naming the file (exit 2), in bounded memory; never a traceback. How
long each command takes is measured by `benchmarks/hostile_traces.py` (a loaded machine is no
defect of the code, so no test here asserts a wall-clock bound).

Two legs: the hand-made files of `tests/data/hostile/`, and hypothesis-corrupted real traces of
every format, both through the command's entry point in-process (peak allocations traced),
and a few of the files through the real command as a subprocess.
"""

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agentx import cli
from agentx.engine.launch import sim_server
from tests.conftest import MOONCAKE, WEKA, ran_but_for_host_timing

HOSTILE = Path(__file__).parent / "data" / "hostile"
ACCEPTED = {"bom_ok.json", "bom_ok.jsonl", "zero_output_ok.jsonl", "at_the_bounds_ok.json", "tracelab_bom_ok.csv",
            "rollout_ok.jsonl"}
# accepted, but no server takes a 10M-token prompt: the sim refuses it, the run is NOT VALID
BENCH_INVALID = {"at_the_bounds_ok.json"}
# what each rejection's one line must name (the field, or the problem)
REJECTED = {
    "binary.json": "not a known trace record",
    "blank_lines.jsonl": "empty file",
    "empty.json": "empty file",
    "truncated.json": "invalid JSON",
    "truncated_last_line.jsonl": "line 2: invalid JSON",
    "utf16.json": "UTF-16",
    "utf16_be_no_bom.jsonl": "UTF-16",
    "nan.json": "invalid JSON",
    "infinity.json": "invalid JSON",
    "float_overflow.json": "requests[1].t",
    "huge_time.json": "requests[1].t",
    "huge_in.json": "requests[1].in",
    "huge_out.json": "requests[0].out",
    "huge_hash_id.json": "requests[0].hash_ids",
    "huge_duration.json": "requests[1].duration_ms",
    "too_many_blocks.json": "requests[0].hash_ids",
    "negative_in.json": "requests[0].in",
    "negative_t.json": "requests[0].t",
    "negative_hash_id.json": "requests[0].hash_ids",
    "zero_length.json": "requests[0].in: a request with no input tokens",
    "zero_length.jsonl": "line 1 input_length: a request with no input tokens",
    "string_numbers.json": "requests[0].in",
    "wrong_type_requests.json": "requests: Expected `array`",
    "wrong_type_hash_ids.json": "requests[0].hash_ids",
    "wrong_type_block_size.json": "block_size",
    "unknown_type.json": "requests[0].type",
    "not_an_object.json": "not a known trace record",
    "just_a_string.json": "not a known trace record",
    "long_model_name.json": "requests[0].model",
    "deep_array.json": "not a known trace record",
    "deep_object.json": "not a known trace record",
    "deep_hash_ids.json": "nested too deeply",
    "deep_unknown_field.json": "nested too deeply",
    "deep_unknown_field.jsonl": "not a known trace record",
    "deep_subagents.json": "subagents nested over 16 deep",
    "deep_subagents_decoder.json": "nested too deeply",
    "bad_line_in_middle.jsonl": "line 5: invalid JSON",
    "negative_in_middle.jsonl": "line 5 input_length",
    "bailian_cycle.jsonl": "parent_chat_id forms a cycle",
    "bailian_duplicate_id.jsonl": "line 2 chat_id",
    "bailian_huge_chat_id.jsonl": "line 1 chat_id",
    "weka_jsonl_bad_middle.jsonl": "line 2 requests[1]",
    "no_traces": "no .json, .jsonl or .csv trace files",
    # the formats of issue #18: the same bounds, decoding and one-line errors
    "agentic_deep_unknown_field.jsonl": "line 2: JSON nested too deeply",
    "agentic_huge_hash_id.jsonl": "line 2 hash_ids[2]",
    "agentic_nan_delay.jsonl": "line 2: invalid JSON",
    "agentic_summed_delay.jsonl": "line 3 delay: 20,000,000,000 s from the session start, over the bound",
    "agentic_wrong_type_wait_for.jsonl": "line 2 wait_for: Expected `array`",
    "tracelab_bad_cell.csv": "line 3 input_len: cell '12abc'",
    "tracelab_bad_line_in_middle.jsonl": "line 3: invalid JSON",
    "tracelab_deep_tools.jsonl": "line 2: JSON nested too deeply",
    "tracelab_far_event_times.jsonl": "line 2 timing_events: 315,537,811,200 s",
    "tracelab_huge_cell.csv": "line 2 prefix_len: cell '99999999999'",
    "tracelab_huge_tokens.jsonl": "line 2 input_tokens_total",
    "tracelab_missing_cell.csv": "line 3 prefix_len: missing cell",
    "tracelab_nan_cell.csv": "line 3 arrival_time: cell 'nan'",
    "tracelab_nul.csv": "line 3 input_len: cell '20\\x000'",
    "tracelab_summed_tokens.csv": "line 2 input_len: 12,000,000 input tokens, over the bound",
    "tracelab_summed_tool_waits.jsonl": "line 2 tools: 20,000,000,000 s",
    "trie_huge_turns.jsonl": "line 1 num_turns",
    "trie_negative_latency.jsonl": "line 1 tool_call_latency[0]",
    "trie_summed_tokens.jsonl": "line 1 tool_call_output_length[1]: 10,100,110 input tokens",
    "trie_wrong_type.jsonl": "line 2 assistant_response_length",
    "rollout_huge_prompt.jsonl": "line 1 prompt_len",
    "rollout_summed_tokens.jsonl": "line 2 obs_lens[0]: 10,004,005 input tokens",
    "rollout_zero_prompt.jsonl": "line 1 prompt_len: a request with no input tokens",
}
MEMORY_BOUND_MB = 512  # peak Python and numpy allocations of one command (tracemalloc), or a process's RSS


def run_main(monkeypatch, capsys, *args) -> tuple[int, str, float]:
    """The command's entry point in-process: (exit status, stderr, peak MB allocated)."""
    monkeypatch.setattr(sys, "argv", ["agentx", *map(str, args)])
    tracemalloc.start()
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli.main()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return exit_info.value.code or 0, capsys.readouterr().err, peak / 2**20


# `agentx ARGS` that also reports its own peak RSS (kB) as the last line on stderr. VmHWM, not
# ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child of a large pytest process
# would report the parent's size.
PEAK_RSS = ("import sys\nfrom agentx.cli import main\ntry:\n    main()\nfinally:\n"
            "    hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
            "    print(hwm.split()[1], file=sys.stderr)")


def run_process(*args) -> tuple[int, str, float]:
    """The real command in a process of its own: (exit status, stderr, peak RSS MB)."""
    res = subprocess.run([sys.executable, "-c", PEAK_RSS, *map(str, args)], capture_output=True, text=True, timeout=60)
    err, _, peak_kb = res.stderr.rstrip().rpartition("\n")
    return res.returncode, err, int(peak_kb) / 1024


def check_outcome(name: str, code: int, err: str, command: str = "trace", run=None) -> None:
    assert "Traceback" not in err, err
    if command == "bench" and name in BENCH_INVALID:
        assert code == 3 and err.strip().splitlines()[-1].startswith("not valid: the run"), err
        return
    if name in ACCEPTED:  # a replay at speed 100 may be NOT VALID for host timing alone (SPEC section 3)
        assert code == 0 or (command == "bench" and ran_but_for_host_timing(code, run)), err
        return
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {HOSTILE / name}") and REJECTED[name] in lines[0], lines[0]


def test_the_hostile_folder_is_fully_listed():
    assert {p.name for p in HOSTILE.iterdir() if p.name != "README.md"} == ACCEPTED | set(REJECTED)


@pytest.fixture(scope="module")
def sim():
    with sim_server("--speed", "100") as url:
        yield url


@pytest.mark.parametrize("name", sorted(ACCEPTED | set(REJECTED)))
def test_hostile_file_is_accepted_or_rejected_in_one_line(sim, tmp_path, monkeypatch, capsys, name):
    out = tmp_path / "converted.jsonl"
    bench = ["bench", "--url", sim, "--traces", HOSTILE / name, "--concurrency", "1", "--duration", "300",
             "--clock-scale", "100", "--no-warmup", "--grace", "5", "--out", tmp_path / "run"]
    for args in (["trace", "stats", HOSTILE / name], ["trace", "convert", HOSTILE / name, "--to", "bailian", "--out", out],
                 bench):
        if args[0] == "bench" and name in ACCEPTED:  # a replay: the real command and its peak memory
            code, err, peak_mb = run_process(*args)
        else:
            code, err, peak_mb = run_main(monkeypatch, capsys, *args)
        check_outcome(name, code, err, args[0], tmp_path / "run")
        assert peak_mb < MEMORY_BOUND_MB, (args, peak_mb)
    if name in ACCEPTED:  # what was written reads back
        code, err, _ = run_main(monkeypatch, capsys, "trace", "stats", out)
        assert code == 0, err


@pytest.mark.parametrize("name", ["huge_in.json", "deep_array.json", "deep_hash_ids.json", "utf16.json"])
def test_the_real_command_prints_one_line_and_exits_2(name):
    """The same as a user sees it: a subprocess, its stderr and exit status."""
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "convert", HOSTILE / name, "--to", "mooncake",
                          "--out", "/dev/null"], capture_output=True, text=True, timeout=60)
    check_outcome(name, res.returncode, res.stderr)


# ------------------------------------------------------------------ hypothesis, in-process

WEKA_DOC = json.loads((WEKA / "trace_0291.json").read_bytes())
ROWS = {  # a few valid records of each row format
    "mooncake": [json.loads(line) for line in MOONCAKE.read_bytes().splitlines()[:6]],
    "bailian": [{"chat_id": i + 1, "parent_chat_id": i if i else -1, "timestamp": i * 3.0, "input_length": 40 + 20 * i,
                 "output_length": 7, "type": "text", "turn": i + 1, "hash_ids": list(range(3 + i))} for i in range(4)],
    "agentic-mooncake": [{"request_id": f"r{i}", "session_id": "s", "timestamp": 1000.0 * i,
                          "input_length": 600 + 500 * i, "output_length": 9, "hash_ids": list(range(2 + i)),
                          "wait_for": [f"r{i - 1}"] if i else [], "delay": 40.0, "branches": []} for i in range(4)],
    "mooncake-delta": [{"session_id": "d", "timestamp": 1000.0 * i, "input_length": 600, "output_length": 9,
                        "hash_ids": [2 * i, 2 * i + 1]} for i in range(4)],
    "tracelab": [{"session_id": "t", "round_index": i, "provider": "claude", "model": "m",
                  "input_tokens_total": 900 + 300 * i, "prefix_tokens": 600 * i, "output_tokens": 20,
                  "tools": [{"tool_wall_latency_ms": 800.0}],
                  "timing_events": [{"event_type": "user_message", "timestamp": f"2026-06-01T10:00:0{2 * i}Z"}]}
                 for i in range(4)],
    "trie": [{"num_turns": 2, "input_prompt_length": 1000 + i, "assistant_response_length": [50, 60],
              "tool_call_output_length": [200, 300], "tool_call_latency": [1.5, 2.0],
              "final_assistant_response_length": 40, "session_id": i} for i in range(3)],
    "rollout": [{"group": 1, "stream": i, "prompt_len": 300, "out_lens": [5, 6], "obs_lens": [40]} for i in range(3)],
}
CSV_COLUMNS = ("id", "input_len", "output_len", "arrival_time", "round_idx", "tool_wait_after_ms", "prefix_len")
CSV_ROWS = [["s", "300", "10", "0.0", "0", "500.0", "0"], ["s", "200", "12", "0.0", "1", "0.0", "256"],
            ["t", "90", "12", "2500.0", "0", "0.0", "0"]]

hostile_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([10**30, 10**12, -1, 0, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.lists(st.integers(-3, 2**64), max_size=4), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),  # raw: nested arrays
)


def _encode(value) -> str:
    if isinstance(value, str) and value.startswith("["):
        return value  # a raw nested array
    return json.dumps(value)  # NaN and Infinity come out as the non-JSON literals


def _corrupt(record: dict, data) -> str:
    """The record as JSON with one field replaced by a hostile value, or removed."""
    key = data.draw(st.sampled_from(sorted(record)))
    items = {k: json.dumps(v) for k, v in record.items()}
    if data.draw(st.booleans()):
        items[key] = _encode(data.draw(hostile_values))
    else:
        del items[key]
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in items.items()) + "}"


hostile_cells = st.one_of(
    st.sampled_from(["nan", "inf", "-1", "1e30", "99999999999", "", "1,2", '"', "\x00", "2.5", "0x10"]),
    st.text(max_size=8), st.integers(-(2**70), 2**70).map(str), st.floats().map(str),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["weka", "tracelab-csv", *ROWS]), st.data())
def test_corrupted_records_through_the_command(tmp_path_factory, monkeypatch, capsys, fmt, data):
    folder = tmp_path_factory.mktemp("hostile")
    if fmt == "weka":  # one field of the session object or of one top-level entry
        entries = [json.dumps(e) for e in WEKA_DOC["requests"]]
        head = {k: v for k, v in WEKA_DOC.items() if k != "requests"}
        if data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(entries) - 1))
            entries[i] = _corrupt(WEKA_DOC["requests"][i], data)
            head_text = json.dumps(head)
        else:
            head_text = _corrupt(head, data)
        text = head_text[:-1] + ', "requests": [' + ", ".join(entries) + "]}"
        path = folder / "corrupt.json"
    elif fmt == "tracelab-csv":  # one cell replaced by hostile text
        rows = [list(r) for r in CSV_ROWS]
        i, j = data.draw(st.integers(0, len(rows) - 1)), data.draw(st.integers(0, len(CSV_COLUMNS) - 1))
        rows[i][j] = data.draw(hostile_cells)
        text = ",".join(CSV_COLUMNS) + "\n" + "".join(",".join(r) + "\n" for r in rows)
        path = folder / "corrupt.csv"
    else:
        rows = ROWS[fmt]
        lines = [json.dumps(r) for r in rows]
        i = data.draw(st.integers(0, len(rows) - 1))
        lines[i] = _corrupt(rows[i], data)
        text = "\n".join(lines) + "\n"
        path = folder / "corrupt.jsonl"
    path.write_text(text)
    named = ["--format", fmt] if fmt == "mooncake-delta" else []  # the one format not detected
    for args in (["trace", "stats", path, *named], ["trace", "convert", path, *named, "--to", "mooncake", "--out",
                                                    folder / "o.jsonl"]):
        code, err, peak_mb = run_main(monkeypatch, capsys, *args)
        assert code in (0, 2) and peak_mb < MEMORY_BOUND_MB, (err, peak_mb)
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), err


def test_a_block_size_that_cannot_be_converted_names_the_file(tmp_path, monkeypatch, capsys):
    """Found by the leg above: a WEKA file of 3-token blocks converted to Mooncake's 512."""
    path = tmp_path / "odd_blocks.json"
    path.write_text(json.dumps({**WEKA_DOC, "block_size": 3}))
    code, err, _ = run_main(monkeypatch, capsys, "trace", "convert", path, "--to", "mooncake", "--out", tmp_path / "o.jsonl")
    assert code == 2 and err.strip() == (f"error: {path}: session trace_0291 block_size: 3-token blocks cannot be "
                                         "converted to 512-token blocks (neither divides the other)")
