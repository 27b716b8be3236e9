"""Trace reads are bounded (issue #46: a 2 GB sparse file was read whole and ended in a MemoryError
traceback): a file over MAX_TRACE_FILE is refused before a byte is read, a row format streams
line by line (a NUL-filled tail under the bound is refused at its first over-long line, never held
whole), and a file or corpus of more than MAX_TRACE_ROWS rows / requests is one line. The time and
memory of the real sizes (2 GiB, 10^6 sessions) are measured by benchmarks/hostile_bounds.py."""

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from agentx.errors import TraceError
from agentx.traces import load, source
from agentx.traces.load import load_sessions

MOONCAKE = Path(__file__).resolve().parents[1] / "data" / "mooncake" / "synthetic_trace_head400.jsonl"


def _sparse(path: Path, head: bytes, size: int) -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)  # a hole: no disk used
    return path


def test_a_2_gib_sparse_file_is_one_line(tmp_path):
    path = _sparse(tmp_path / "big.jsonl", MOONCAKE.read_bytes()[:2000].rsplit(b"\n", 1)[0] + b"\n", 2 << 30)
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", str(path)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr == (f"error: {path}: 2,147,483,648 bytes, over the bound of 1,073,741,824 bytes for a trace "
                          "file (split it: a folder of trace files is one corpus)\n")


def test_a_nul_tail_under_the_bound_is_refused_at_its_line_never_held_whole(tmp_path):
    first = MOONCAKE.read_bytes().split(b"\n", 1)[0] + b"\n"
    path = _sparse(tmp_path / "tail.jsonl", first, 256 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(TraceError) as err:
            load_sessions([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(err.value) == f"{path}: line 2: over the bound of 16,777,216 bytes for a line"
    assert peak < 3 * source.MAX_TRACE_LINE  # the 256 MiB file was not read whole


def test_a_binary_head_is_refused_before_the_rest_is_read(tmp_path):
    path = _sparse(tmp_path / "zeros.jsonl", b"", 512 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match="UTF-16 \\(or binary\\) text"):
            load_sessions([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_rows_of_a_file_and_requests_of_a_corpus_are_bounded(tmp_path, monkeypatch):
    lines = MOONCAKE.read_bytes().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:30]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[30:60]))
    assert sum(s.n_requests for s in load_sessions([tmp_path])) == 60
    monkeypatch.setattr(source, "MAX_TRACE_ROWS", 40)
    monkeypatch.setattr(load, "MAX_TRACE_ROWS", 40)
    with pytest.raises(TraceError) as err:
        load_sessions([tmp_path])
    assert str(err.value) == (f"{tmp_path / 'b.jsonl'}: the corpus holds more than 40 requests with this file "
                              "(load fewer files)")
    monkeypatch.setattr(source, "MAX_TRACE_ROWS", 20)
    with pytest.raises(TraceError) as err:
        load_sessions([tmp_path / "a.jsonl"])
    assert str(err.value) == f"{tmp_path / 'a.jsonl'}: line 21: more than 20 rows in one trace file (split it)"
